//! `/v1/approvals`: requests waiting for other people's approval, and deciding them. Reading
//! takes `approvals:read`; deciding takes `approvals:decide`, and the caller decides as the
//! person their token names (its `sub`, a person of the directory): only a holder of a role the
//! approval names, never its requester, once.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::names::named_enum;
use crate::domain::registry::approvals::Vote;
use crate::http::auth::{Caller, Principal, require};
use crate::http::body::JsonBody;
use crate::http::error::invalid_body;
use crate::http::responses::{BearerErrors, NoSuchApproval, PROBLEM_JSON, ProblemDocument};
use crate::http::routes::recovery::step_up_problem;
use crate::http::{ApiError, AppState, Problem};
use crate::service::approvals::ApprovalStatus;
use crate::service::approvals::break_glass::{Overridden, Overriding, SHORTEST_REASON, break_glass};
use crate::service::approvals::decide::{Decided, Deciding, NotYours, ProofRefused, decide};
use crate::service::approvals::view::{self, ApprovalView, MissingView};
use crate::service::security::{StepUpError, StepUpFailure};

pub const READ: &str = "approvals:read";
pub const DECIDE: &str = "approvals:decide";
/// Break-glass: an operator's, never a directory role's (docs/APPROVALS.md).
pub const OVERRIDE: &str = "approvals:override";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/approvals", get(list).route_layer(require(READ)))
        .route("/v1/approvals/{id}", get(read).route_layer(require(READ)))
        .route("/v1/approvals/{id}/decision", post(decision).route_layer(require(DECIDE)))
        .route("/v1/approvals/{id}/override", post(override_approval).route_layer(require(OVERRIDE)))
}

/// A path's `{id}` that names an approval.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(names("id"), parameter_in = Path)]
pub(crate) struct ApprovalPath(
    /// The approval's id
    Uuid,
);

/// The tenant's pending approvals.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalList {
    pub approvals: Vec<ApprovalView>,
}

/// A decision: approve or deny, and why (kept with it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    pub decision: Vote,
    #[serde(default)]
    pub reason: Option<String>,
    /// The approver's step-up JWT (its `sub` them, bound to the approval's command and key), for
    /// an approval a rule asks its approvers to step up for.
    #[serde(default)]
    pub step_up_token: Option<String>,
}

named_enum! {
    /// What a counted decision came to: `recorded` (the approval still waits), `approved` (the
    /// command was allowed and dispatched) or `denied` (the command was rejected).
    Counted {
        Recorded => "recorded",
        Approved => "approved",
        Denied => "denied",
    }
}

/// What a decision came to, and the approval after it.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionMade {
    pub outcome: Counted,
    /// What it still waits for (`recorded`).
    pub missing: Vec<MissingView>,
    pub approval: Option<ApprovalView>,
}

#[utoipa::path(get, path = "/v1/approvals", operation_id = "list_approvals", tag = "approvals",
    security(("bearer" = ["approvals:read"])),
    responses((status = 200, description = "The tenant's pending approvals, oldest first", body = ApprovalList),
    BearerErrors))]
pub(crate) async fn list(Caller { state, principal }: Caller) -> Result<Json<ApprovalList>, ApiError> {
    Ok(Json(ApprovalList { approvals: view::pending(&state.engine, &principal.tenant, 500).await? }))
}

#[utoipa::path(get, path = "/v1/approvals/{id}", operation_id = "get_approval", tag = "approvals",
    security(("bearer" = ["approvals:read"])), params(ApprovalPath),
    responses((status = 200, description = "The approval", body = ApprovalView), NoSuchApproval, BearerErrors))]
pub(crate) async fn read(
    Caller { state, principal }: Caller,
    Path(ApprovalPath(id)): Path<ApprovalPath>,
) -> Result<Json<ApprovalView>, ApiError> {
    let approval = view::approval(&state.engine, &principal.tenant, id).await?;
    Ok(Json(approval.ok_or_else(|| not_found(id))?))
}

#[utoipa::path(post, path = "/v1/approvals/{id}/decision", operation_id = "decide_approval", tag = "approvals",
    security(("bearer" = ["approvals:decide"])), params(ApprovalPath),
    request_body(content = inline(DecisionBody), content_type = "application/json"),
    responses((status = 200, description = "Counted: still waiting, approved or denied", body = DecisionMade),
    (status = 400, description = "Not a decision", content_type = PROBLEM_JSON, body = ProblemDocument),
    (status = 401, description = "A step-up proof is asked for, or does not hold", content_type = PROBLEM_JSON,
        body = ProblemDocument),
    (status = 403, description = "Not yours to decide: your own request, or no role that decides it",
        content_type = PROBLEM_JSON, body = ProblemDocument), NoSuchApproval,
    (status = 409, description = "Decided before: settled, or by you", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn decision(
    Caller { state, principal }: Caller,
    Path(ApprovalPath(id)): Path<ApprovalPath>,
    JsonBody(body): JsonBody<DecisionBody>,
) -> Result<Json<DecisionMade>, ApiError> {
    Ok(Json(decide_as(&state, &principal, id, body, "api").await?))
}

/// `principal` decides `body` on approval `id`, from `via` (`api`, `console`): the API's answer,
/// or the refusal as a problem document. The console's buttons decide through it too.
pub(crate) async fn decide_as(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    body: DecisionBody,
    via: &str,
) -> Result<DecisionMade, ApiError> {
    let deciding = Deciding {
        tenant: &principal.tenant,
        approval_id: id,
        approver: &principal.subject,
        vote: body.decision,
        reason: body.reason.filter(|r| !r.trim().is_empty()),
        via,
        step_up: body.step_up_token.as_deref(),
    };
    let (outcome, missing) = match decide(&state.engine, &state.policy, &deciding, OffsetDateTime::now_utc()).await? {
        Decided::Waiting(missing) => (Counted::Recorded, missing.into_iter().map(MissingView::from).collect()),
        Decided::Approved => (Counted::Approved, vec![]),
        Decided::Denied => (Counted::Denied, vec![]),
        Decided::ProofWanted(refused) => {
            let failure = match refused {
                None => StepUpFailure::Proof(StepUpError::Insufficient("this approval asks its approvers to step up")),
                Some(ProofRefused::Invalid(error)) => StepUpFailure::Proof(error),
                Some(ProofRefused::Used) => StepUpFailure::Used,
            };
            return Err(step_up_problem(state, id, failure));
        }
        Decided::NotFound => return Err(not_found(id)),
        Decided::Settled { status } => return Err(settled(status)),
        Decided::AlreadyDecided { vote } => return Err(already_decided(vote)),
        Decided::NotYours(why) => return Err(not_yours(why)),
    };
    let approval = view::approval(&state.engine, &principal.tenant, id).await?;
    Ok(DecisionMade { outcome, missing, approval })
}

/// Break-glass: why, in a sentence, and the operator's own step-up proof for the command.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OverrideBody {
    /// Why the approvers are passed over (at least 10 characters); kept in the evidence.
    pub(crate) reason: String,
    /// A step-up JWT of the operator (its `sub`) for the approval's command and idempotency key.
    pub(crate) step_up_token: String,
}

named_enum! {
    /// What an override came to: `overridden`, the command goes ahead as if approved.
    OverrideOutcome {
        Overridden => "overridden",
    }
}

/// An override done, and the approval after it.
#[derive(Debug, Serialize, ToSchema)]
pub struct OverrideMade {
    pub outcome: OverrideOutcome,
    pub approval: Option<ApprovalView>,
}

#[utoipa::path(post, path = "/v1/approvals/{id}/override", operation_id = "override_approval", tag = "approvals",
    security(("bearer" = ["approvals:override"])), params(ApprovalPath),
    request_body(content = inline(OverrideBody), content_type = "application/json"),
    responses((status = 200, description = "Overridden: the command goes ahead", body = OverrideMade),
    (status = 400, description = "Not an override, or a reason too short", content_type = PROBLEM_JSON,
        body = ProblemDocument),
    (status = 401, description = "The step-up proof is missing, invalid, too weak or too old",
        content_type = PROBLEM_JSON, body = ProblemDocument), NoSuchApproval,
    (status = 409, description = "Settled before, or the proof was used", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn override_approval(
    Caller { state, principal }: Caller,
    Path(ApprovalPath(id)): Path<ApprovalPath>,
    JsonBody(body): JsonBody<OverrideBody>,
) -> Result<Json<OverrideMade>, ApiError> {
    let overriding = Overriding {
        tenant: &principal.tenant,
        approval_id: id,
        operator: &principal.subject,
        reason: &body.reason,
        step_up_token: &body.step_up_token,
    };
    match break_glass(&state.engine, &state.policy, &overriding, OffsetDateTime::now_utc()).await {
        Ok(Overridden::Done) => {
            let approval = view::approval(&state.engine, &principal.tenant, id).await?;
            Ok(Json(OverrideMade { outcome: OverrideOutcome::Overridden, approval }))
        }
        Ok(Overridden::ReasonTooShort) => {
            Err(invalid_body(&format!("`reason` says why, in at least {SHORTEST_REASON} characters.")))
        }
        Ok(Overridden::Settled { status }) => Err(settled(status)),
        Err(StepUpFailure::NotFound) => Err(not_found(id)),
        Err(failure) => Err(step_up_problem(&state, id, failure)),
    }
}

fn not_found(id: Uuid) -> ApiError {
    Problem::for_status(StatusCode::NOT_FOUND).detail(format!("No approval {id} in this tenant.")).into()
}

fn settled(status: ApprovalStatus) -> ApiError {
    Problem::new(StatusCode::CONFLICT, "approval_settled", "Decided before")
        .detail(format!("The approval is {status}."))
        .with("status", status.as_str())
        .into()
}

fn already_decided(vote: Vote) -> ApiError {
    let word = match vote {
        Vote::Approve => "approved",
        Vote::Deny => "denied",
    };
    Problem::new(StatusCode::CONFLICT, "already_decided", "Decided before")
        .detail(format!("You {word} it before; that decision stands."))
        .into()
}

fn not_yours(why: NotYours) -> ApiError {
    let detail = match why {
        NotYours::OwnRequest => "No one approves their own request.",
        NotYours::NotAnApprover => "You hold no role that decides this approval.",
    };
    Problem::new(StatusCode::FORBIDDEN, "not_yours_to_decide", "Not yours to decide").detail(detail).into()
}
