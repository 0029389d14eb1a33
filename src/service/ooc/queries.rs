//! The built-in questions: what happened to my requests, and (for operators) to the tenant's.
//! Each answers structured values; the templates (`templates/{channel}/{locale}/`) say them.

use serde::Serialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::domain::command::ShortRef;
use crate::domain::evidence::mask;
use crate::domain::lifecycle::{EvidenceKind, State};
use crate::domain::names::named_enum;
use crate::domain::registry::approvals::Vote;
use crate::service::ooc::{AgentLine, Answer, Asker, Gateway, Operation, PAGE, Refusal, arg, refused, view, when};
use crate::service::security::authz::{APPROVAL_REQUIRED, STEP_UP_REQUIRED};
use crate::store::{CommandFilter, StoredCommand};

/// How many artifacts or trace lines a reply shows.
const DETAIL_LINES: usize = 8;

/// One line about a command: its reference, what it is, where it is and since when.
fn line(gateway: &Gateway, command: &StoredCommand, with_actor: bool) -> Value {
    let mut line = json!({
        "ref": ShortRef::of(command.envelope.command_id),
        "command": gateway.name_of(command),
        "state": command.lifecycle.state,
        "at": when(command.updated_at),
        "reason": command.reason_code,
    });
    if with_actor {
        line["actor"] = mask(command.envelope.actor_id.as_str()).into();
    }
    line
}

/// Page `page` (from 1) of `commands`, as lines.
fn page_of(gateway: &Gateway, commands: &[StoredCommand], page: usize, with_actor: bool, list: &str) -> Value {
    let start = (page.max(1) - 1) * PAGE;
    let items: Vec<Value> = commands.iter().skip(start).take(PAGE).map(|c| line(gateway, c, with_actor)).collect();
    json!({"list": list, "page": page, "items": items, "more": commands.len() > start + PAGE})
}

/// This asker's own commands, newest first, built-ins left out.
async fn own_commands(
    gateway: &Gateway,
    asker: &Asker<'_>,
) -> Result<Vec<StoredCommand>, crate::service::ooc::Refusal> {
    let filter = CommandFilter { actor: Some(asker.actor.to_owned()), limit: 200, ..CommandFilter::default() };
    let commands = gateway.engine.store().commands().list(asker.tenant, &filter).await?;
    Ok(commands.into_iter().filter(|c| !gateway.is_builtin(c)).collect())
}

/// `status`: the asker's recent commands.
pub(super) async fn requests(gateway: &Gateway, asker: &Asker<'_>, page: usize) -> Answer {
    let commands = own_commands(gateway, asker).await?;
    Ok(page_of(gateway, &commands, page, false, "requests"))
}

/// `failures`: the tenant's failed and stuck commands.
pub(super) async fn failures(gateway: &Gateway, asker: &Asker<'_>, page: usize, now: OffsetDateTime) -> Answer {
    let commands = crate::service::recovery::bulk::needs_attention(&gateway.engine, asker.tenant, now, 200).await?;
    let commands: Vec<StoredCommand> = commands.into_iter().filter(|c| !gateway.is_builtin(c)).collect();
    Ok(page_of(gateway, &commands, page, true, "failures"))
}

/// `more`: the next page of the list this asker asked for last (`status` or `failures`).
pub(super) async fn more(gateway: &Gateway, asker: &Asker<'_>) -> Answer {
    let filter = CommandFilter { actor: Some(asker.actor.to_owned()), limit: 50, ..CommandFilter::default() };
    let history = gateway.engine.store().commands().list(asker.tenant, &filter).await?;
    let mut pages = 1;
    for command in history.iter().filter(|c| c.envelope.command_id != asker.command.envelope.command_id) {
        if !gateway.is_builtin(command) {
            continue;
        }
        match Operation::of(&command.envelope.intent.entity, &command.envelope.intent.action) {
            Some(Operation::More) => pages += 1,
            Some(Operation::Requests) => return requests(gateway, asker, pages + 1).await,
            Some(Operation::Failures) => return failures(gateway, asker, pages + 1, OffsetDateTime::now_utc()).await,
            _ => break,
        }
    }
    Err(refused("nothing_more", json!({})))
}

/// What the asker can do next about `command`: the recovery actions for an operator, else what
/// a person can do from the chat.
fn next_steps(asker: &Asker<'_>, document: &view::CommandStatus, reference: &ShortRef) -> Vec<Value> {
    if asker.scopes.contains(crate::service::recovery::WRITE_SCOPE) {
        return document
            .recovery_actions
            .iter()
            .map(|a| json!({"action": a, "say": format!("{a} {reference}")}))
            .collect();
    }
    let state = document.state;
    let hint = match state {
        State::ConfirmationRequired => "confirm",
        State::Failed | State::Rejected | State::Canceled => "ask_again",
        State::Executed | State::Compensated => "nothing",
        _ => "wait",
    };
    vec![json!({"action": hint, "say": format!("why {reference}")})]
}

/// `status <ref>`: one command in plain words.
pub(super) async fn status(gateway: &Gateway, asker: &Asker<'_>) -> Answer {
    let command = gateway.resolve(asker, arg(asker.command, "ref").unwrap_or_default()).await?;
    let document = view::status(&gateway.engine, &gateway.policy, &command, false).await?;
    let reference = ShortRef::of(command.envelope.command_id);
    let mut answer = line(gateway, &command, asker.sees_all() && command.envelope.actor_id.as_str() != asker.actor);
    answer["terminal"] = document.terminal.into();
    answer["next"] = next_steps(asker, &document, &reference).into();
    if let Some(waiting) = waiting_for(gateway, &command).await? {
        answer["waiting_for"] = waiting;
    }
    Ok(answer)
}

/// Whom a command waits for when it waits for people's approval: the roles that may give what is
/// still missing (never a person), how many approvals, until when.
async fn waiting_for(gateway: &Gateway, command: &StoredCommand) -> Result<Option<Value>, Refusal> {
    if !matches!(command.lifecycle.state, State::AuthzPending | State::Started) {
        return Ok(None);
    }
    let (e, approvals) = (&command.envelope, gateway.engine.store().approvals());
    let Some(approval) = approvals.of_command(&e.tenant_id, e.command_id).await? else { return Ok(None) };
    let decisions = approvals.decisions(approval.id).await?;
    let missing = crate::service::approvals::view::missing(&approval, &decisions, OffsetDateTime::now_utc());
    if missing.is_empty() {
        return Ok(None);
    }
    let roles: std::collections::BTreeSet<&String> = missing.iter().flat_map(|m| &m.roles).collect();
    let count = missing.iter().map(|m| m.approvals).max().unwrap_or(1);
    Ok(Some(json!({"roles": roles, "approvals": count, "until": when(approval.expires_at)})))
}

named_enum! {
    /// One step of a command's decision trail, as `why` names it.
    TrailStep {
        Received => "received",
        ConfirmationAsked => "confirmation_asked",
        Answered => "answered",
        Confirmed => "confirmed",
        SteppedUp => "stepped_up",
        StepUpAsked => "step_up_asked",
        ApprovalAsked => "approval_asked",
        Denied => "denied",
        Authorized => "authorized",
        ApprovalSettled => "approval_settled",
        ApprovalRefused => "approval_refused",
        ApprovalGiven => "approval_given",
        Overridden => "overridden",
        ApprovalEscalated => "approval_escalated",
        LockReleased => "lock_released",
        Started => "started",
        Executed => "executed",
        Failed => "failed",
        Rejected => "rejected",
        Canceled => "canceled",
        Compensated => "compensated",
        Recovery => "recovery",
        Duplicate => "duplicate",
    }
}

/// One line of `why`'s trail: the step, when, why, and what it came to.
#[derive(Debug, Serialize)]
struct TrailLine<'a> {
    step: TrailStep,
    at: Option<String>,
    reason: Option<&'a str>,
    outcome: Option<&'a str>,
}

/// One step of a decision trail, from one artifact; none for artifacts that say nothing new
/// (messages sent, refused transition attempts, the directory's and the purge's records).
fn step(artifact: &crate::store::StoredArtifact) -> Option<TrailLine<'_>> {
    use {EvidenceKind as K, TrailStep as T};
    let body = &artifact.body;
    let decision = &body["decision"];
    let reason = body["reason_code"].as_str();
    let step = match artifact.kind.parse::<EvidenceKind>().ok()? {
        K::CommandAccepted => T::Received,
        K::ConfirmationRequested => T::ConfirmationAsked,
        K::ConfirmationAnswered => T::Answered,
        K::ConfirmationSatisfied => T::Confirmed,
        K::AuthzDecided if decision.get("step_up_proof").is_some() => T::SteppedUp,
        K::AuthzDecided if reason == Some(STEP_UP_REQUIRED) => T::StepUpAsked,
        K::AuthzRequested if reason == Some(APPROVAL_REQUIRED) => T::ApprovalAsked,
        K::AuthzDecided if reason.is_some() => T::Denied,
        K::AuthzDecided => T::Authorized,
        K::ApprovalRequested => T::ApprovalAsked,
        K::ApprovalDecided if decision.get("status").is_some() => T::ApprovalSettled,
        K::ApprovalDecided if decision["decision"] == Vote::Deny.as_str() => T::ApprovalRefused,
        K::ApprovalDecided => T::ApprovalGiven,
        K::ApprovalOverridden => T::Overridden,
        K::ApprovalEscalated => T::ApprovalEscalated,
        K::LockReleased => T::LockReleased,
        K::ExecutionStarted => T::Started,
        K::ExecutionExecuted => T::Executed,
        K::ExecutionFailed => T::Failed,
        K::ExecutionRejected => T::Rejected,
        K::CommandCanceled => T::Canceled,
        K::CompensationCompensated => T::Compensated,
        K::RecoveryRequested => T::Recovery,
        K::DedupeDecided => T::Duplicate,
        K::AuthzRequested
        | K::InvalidTransitionAttempt
        | K::MessageSent
        | K::MessageFailed
        | K::DirectoryChanged
        | K::RetentionPurged => return None,
    };
    let at = body["recorded_at"]
        .as_str()
        .and_then(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok())
        .map(when);
    let outcome = decision["outcome"].as_str().or(decision["action"].as_str()).or(decision["status"].as_str());
    Some(TrailLine { step, at, reason, outcome })
}

/// One of `why`'s deliveries: to which executor, where it stands (its outcome once it has one),
/// why it failed, and how many times it was handed over.
#[derive(Debug, Serialize)]
struct DeliveryLine<'a> {
    target: &'a str,
    state: String,
    failure_class: Option<&'a str>,
    attempts: i64,
}

/// `why <ref>`: the decision trail, from the evidence, summary first.
pub(super) async fn why(gateway: &Gateway, asker: &Asker<'_>) -> Answer {
    let command = gateway.resolve(asker, arg(asker.command, "ref").unwrap_or_default()).await?;
    let store = gateway.engine.store();
    let id = command.envelope.command_id;
    let artifacts = store.evidence().for_command(asker.tenant.as_str(), id).await?;
    let steps: Vec<TrailLine> = artifacts.iter().filter_map(step).collect();
    let attempts = store.deliveries().dispatch_attempts(id).await?;
    let attempts_of = |target: &str| attempts.iter().find(|(t, _)| t == target).map_or(0, |(_, n)| *n);
    let deliveries = store.deliveries().of_command(id).await?;
    let deliveries: Vec<DeliveryLine> = deliveries
        .iter()
        .filter(|d| d.target != crate::service::ooc::GATEWAY)
        .map(|d| DeliveryLine {
            target: &d.target,
            state: d.outcome.map_or_else(|| d.state.to_string(), |o| o.to_string()),
            // The executor's own error code when it refused, else the transport's failure class.
            failure_class: d.failure_class.as_deref().or_else(|| d.detail.as_ref().and_then(|x| x["code"].as_str())),
            attempts: attempts_of(&d.target),
        })
        .collect();
    let mut answer = line(gateway, &command, false);
    answer["more_steps"] = steps.len().saturating_sub(DETAIL_LINES).into();
    answer["steps"] = json!(steps.into_iter().take(DETAIL_LINES).collect::<Vec<_>>());
    answer["deliveries"] = json!(deliveries);
    Ok(answer)
}

/// `trace <ref>`: the causation timeline of the command's correlation, summarized.
pub(super) async fn trace(gateway: &Gateway, asker: &Asker<'_>) -> Answer {
    let command = gateway.resolve(asker, arg(asker.command, "ref").unwrap_or_default()).await?;
    let nodes = gateway.engine.store().commands().trace(asker.tenant, command.envelope.correlation_id.as_str()).await?;
    let count = |kind: &str| nodes.iter().filter(|n| n.kind == kind).count();
    let lines: Vec<Value> = nodes
        .iter()
        .filter(|n| matches!(n.kind, "command" | "transition" | "delivery"))
        .map(|n| {
            let reference = n.id.parse::<uuid::Uuid>().ok().map(ShortRef::of);
            json!({
                "at": when(n.at),
                "kind": n.kind,
                "ref": reference,
                "what": n.detail["intent"].as_str().or(n.detail["target"].as_str()),
                "state": n.detail["state"].as_str().or(n.detail["to"].as_str()).or(n.detail["outcome"].as_str()),
                "reason": n.detail["reason_code"].as_str().or(n.detail["failure_class"].as_str()),
            })
        })
        .collect();
    let mut answer = line(gateway, &command, false);
    answer["commands"] = count("command").into();
    answer["messages"] = count("message").into();
    answer["replies"] = count("reply").into();
    answer["more_lines"] = lines.len().saturating_sub(DETAIL_LINES).into();
    answer["lines"] = lines.into_iter().take(DETAIL_LINES).collect::<Vec<_>>().into();
    Ok(answer)
}

/// `evidence <ref>`: the artifacts, masked to kind, time, reason and the start of their hash.
pub(super) async fn evidence(gateway: &Gateway, asker: &Asker<'_>) -> Answer {
    let command = gateway.resolve(asker, arg(asker.command, "ref").unwrap_or_default()).await?;
    let id = command.envelope.command_id;
    let artifacts = gateway.engine.store().evidence().for_command(asker.tenant.as_str(), id).await?;
    let items: Vec<Value> = artifacts
        .iter()
        .take(DETAIL_LINES)
        .map(|a| {
            json!({
                "seq": a.seq,
                "kind": a.kind,
                "reason": a.body["reason_code"],
                "hash": a.hash.chars().take(10).collect::<String>(),
            })
        })
        .collect();
    let mut answer = line(gateway, &command, false);
    answer["count"] = artifacts.len().into();
    answer["more_items"] = artifacts.len().saturating_sub(DETAIL_LINES).into();
    answer["items"] = items.into();
    Ok(answer)
}

/// `agents`: every agent and its state.
pub(super) async fn agents(gateway: &Gateway, _asker: &Asker<'_>) -> Answer {
    let agents = crate::service::agents::list(gateway.engine.database(), &gateway.policy.agents).await?;
    let items: Vec<Value> = agents.iter().map(|(agent, it)| AgentLine { agent, state: it.state }.value()).collect();
    Ok(json!({"items": items}))
}

#[cfg(test)]
mod tests {
    use super::TrailStep;

    /// A step a `why` template does not name would show as a bare number in the chat.
    #[test]
    fn every_why_template_names_every_step() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
        let channels = std::fs::read_dir(&root).expect("templates").flatten();
        let locales = channels.flat_map(|channel| std::fs::read_dir(channel.path()).into_iter().flatten().flatten());
        let whys: Vec<_> = locales.map(|locale| locale.path().join("why.txt")).filter(|why| why.exists()).collect();
        assert!(!whys.is_empty(), "no why.txt under {}", root.display());
        for why in whys {
            let text = std::fs::read_to_string(&why).expect("template");
            for step in TrailStep::ALL {
                assert!(text.contains(&format!("s.step == \"{step}\"")), "{} says nothing of {step}", why.display());
            }
        }
    }
}
