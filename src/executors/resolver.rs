//! The client of a tenant's identity resolver: a signed Standard Webhooks request about a sender
//! its directory does not know (tenant, channel, address, the provider's profile name), and the
//! answer read — a person, or "unknown". Anything else (a timeout, a 5xx, a body that is not an
//! answer) is an error the caller retries.

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::directory::{Lookup, Resolved, Resolver, ResolverAnswer};

#[derive(Debug, Clone)]
pub struct ResolverClient {
    http: reqwest::Client,
}

impl ResolverClient {
    pub fn new() -> Result<Self, reqwest::Error> {
        Ok(Self { http: reqwest::Client::builder().pool_idle_timeout(std::time::Duration::from_secs(30)).build()? })
    }

    /// Who `lookup` is, by `resolver`: `Ok(None)` for "unknown".
    pub async fn ask(
        &self,
        resolver: &Resolver,
        lookup: &Lookup,
        now: OffsetDateTime,
    ) -> Result<Option<Resolved>, String> {
        let body = serde_json::to_vec(lookup).map_err(|e| e.to_string())?;
        let id = format!("lookup_{}", Uuid::now_v7());
        let request =
            self.http.post(&resolver.url).timeout(resolver.timeout).header("content-type", "application/json");
        let request = crate::executors::executor::signed(request, Some(&resolver.key), &id, now, body);
        let response = request.send().await.map_err(|e| format!("the resolver did not answer: {e}"))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| format!("the resolver's answer was cut: {e}"))?;
        if !status.is_success() {
            return Err(format!("the resolver answered {status}: {}", text.chars().take(200).collect::<String>()));
        }
        let answer: ResolverAnswer =
            serde_json::from_str(&text).map_err(|e| format!("not a resolver's answer: {e}"))?;
        answer.person().map_err(|e| format!("the resolver's person cannot be kept: {e}"))
    }
}
