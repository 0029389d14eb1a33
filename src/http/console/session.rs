//! The console's proof of who is calling, as extractors: a handler that takes [`Signed`] runs
//! only for an open session (svix-style: its presence proves the check ran), and one that takes
//! [`Changing`] only for a form that carries the session's CSRF token as well; [`Reading`] only
//! for a session whose token holds the page's scope. Scopes and the
//! tenant are exactly the bearer token's: the session holds the principal the token proved.

use std::marker::PhantomData;

use axum::Form;
use axum::extract::{FromRef, FromRequest, FromRequestParts, Request};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use cookie::{Cookie, SameSite};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;

use super::page::PageError;
use crate::http::AppState;
use crate::service::database::Database;
use crate::service::security::Principal;
use crate::service::security::sessions::{SignedIn, signed_in};

pub use crate::http::auth::{COOKIE, cookie_value};

/// The `Set-Cookie` that hands the browser its session: HttpOnly (no script reads it),
/// SameSite=Strict (no other site sends it), Secure when the console is reached over https.
pub fn session_cookie(value: &str, expires_at: OffsetDateTime, now: OffsetDateTime, secure: bool) -> String {
    let seconds = (expires_at - now).whole_seconds().max(0);
    Cookie::build((COOKIE, value.to_owned()))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(seconds))
        .build()
        .to_string()
}

/// The `Set-Cookie` that removes the session cookie.
pub fn cleared_cookie(secure: bool) -> String {
    let mut cookie = Cookie::build((COOKIE, "")).path("/").http_only(true).same_site(SameSite::Strict).secure(secure);
    cookie = cookie.max_age(cookie::time::Duration::ZERO);
    cookie.build().to_string()
}

/// Whether the browser reached us over https: the configured public URL says so, or the proxy
/// in front of us does (`X-Forwarded-Proto`).
pub fn over_https(state: &AppState, headers: &HeaderMap) -> bool {
    let proxied = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|p| p == "https");
    proxied || state.config.server.public_base_url.starts_with("https://")
}

/// The operator behind an open console session.
#[derive(Debug, Clone)]
pub struct Signed(pub SignedIn);

impl Signed {
    pub fn principal(&self) -> &Principal {
        &self.0.principal
    }

    /// The operator as the API's handlers take their caller, to call them with.
    pub(crate) fn caller(&self, state: &AppState) -> crate::http::auth::Caller {
        crate::http::auth::Caller { state: state.clone(), principal: self.principal().clone() }
    }

    /// Refuses, as the API would, an operator whose token lacks `scope`.
    pub fn require(&self, scope: &'static str) -> Result<(), PageError> {
        if self.0.principal.scopes.contains(scope) { Ok(()) } else { Err(PageError::Scope(scope)) }
    }
}

impl<S> FromRequestParts<S> for Signed
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, PageError> {
        let state = AppState::from_ref(state);
        let Some(value) = cookie_value(&parts.headers) else { return Err(PageError::SignIn) };
        let session = session_of(&state.database, &value).await?.ok_or(PageError::SignIn)?;
        let client = format!("{}|{}", session.principal.issuer, session.principal.subject);
        if let Err(wait) = state.policy.security.limits.api_client(&client) {
            return Err(PageError::TooMany(wait));
        }
        Ok(Self(session))
    }
}

pub async fn session_of(database: &Database, value: &str) -> Result<Option<SignedIn>, PageError> {
    Ok(signed_in(database, value, OffsetDateTime::now_utc()).await?)
}

#[derive(Deserialize)]
struct WithCsrf<T> {
    #[serde(default)]
    csrf: String,
    #[serde(flatten)]
    form: T,
}

/// A scope as a type, so that an extractor naming it proves by its presence that the check ran.
pub trait Scope {
    /// Refuses, as the API would, an operator whose token lacks it.
    fn check(signed: &Signed) -> Result<(), PageError>;
}

macro_rules! scopes {
    ($($(#[$doc:meta])* $name:ident = $scope:expr;)*) => {
        $($(#[$doc])* pub struct $name;
        impl Scope for $name {
            fn check(signed: &Signed) -> Result<(), PageError> {
                signed.require($scope)
            }
        })*
    };
}

/// Any signed-in operator (signing out asks for no scope).
pub struct AnyScope;

impl Scope for AnyScope {
    fn check(_: &Signed) -> Result<(), PageError> {
        Ok(())
    }
}

scopes! {
    /// `commands:read`: the commands, their status and evidence.
    CommandsRead = crate::http::routes::commands::READ;
    /// `audit:read`: the evidence chains checked.
    AuditRead = crate::http::routes::commands::AUDIT;
    /// `approvals:read`: the approvals waiting.
    ApprovalsRead = crate::http::routes::approvals::READ;
    /// `locks:read`: the locks held.
    LocksRead = crate::http::routes::locks::READ;
    /// `directory:read`: the people of the directory.
    DirectoryRead = crate::http::routes::directory::READ;
    /// `directory:write`: changing people, erasing them, issuing link codes.
    DirectoryWrite = crate::http::routes::directory::WRITE;
    /// `approvals:decide`: deciding an approval as oneself.
    ApprovalsDecide = crate::http::routes::approvals::DECIDE;
    /// `locks:release`: releasing a lock.
    LocksRelease = crate::http::routes::locks::RELEASE;
    /// `recovery:write`: recovering commands, one or many.
    RecoveryWrite = crate::http::routes::recovery::WRITE;
    /// `agents:read`: the agents and their states.
    AgentsRead = crate::http::routes::agents::READ;
    /// `agents:admin`: pausing and resuming agents.
    AgentsAdmin = crate::service::agents::ADMIN_SCOPE;
}

/// A page read by a signed-in operator whose session holds scope `S` (refused as the API would
/// otherwise), with the gateway's state.
pub struct Reading<S> {
    pub state: AppState,
    pub signed: Signed,
    scope: PhantomData<S>,
}

impl<S: Scope> FromRequestParts<AppState> for Reading<S> {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, PageError> {
        let signed = Signed::from_request_parts(parts, state).await?;
        S::check(&signed)?;
        Ok(Self { state: state.clone(), signed, scope: PhantomData })
    }
}

/// A form that changes something, from a signed-in operator whose session holds scope `S`,
/// carrying the session's CSRF token; with the gateway's state.
pub struct Changing<S, T> {
    pub state: AppState,
    pub signed: Signed,
    pub form: T,
    scope: PhantomData<S>,
}

impl<S: Scope, T> FromRequest<AppState> for Changing<S, T>
where
    T: DeserializeOwned + Send,
{
    type Rejection = PageError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, PageError> {
        let (mut parts, body) = request.into_parts();
        let signed = Signed::from_request_parts(&mut parts, state).await?;
        let request = Request::from_parts(parts, body);
        let Form(WithCsrf { csrf, form }) =
            Form::<WithCsrf<T>>::from_request(request, state).await.map_err(|e| PageError::BadForm(e.body_text()))?;
        if !signed.0.csrf_matches(&csrf) {
            return Err(PageError::Csrf);
        }
        S::check(&signed)?;
        Ok(Self { state: state.clone(), signed, form, scope: PhantomData })
    }
}
