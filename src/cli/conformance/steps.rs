//! Doing a step: a provider's delivery, a hook call, an API call, the executor's answer, a wait
//! or a restart. Deliveries sent several times go one after another or all at the same moment.

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::cli::conformance::providers;
use crate::cli::conformance::rig::{OPERATOR, Rig};
use crate::cli::conformance::scenario::{Action, ApiCall, Hook, Repeat, Step};

/// What the gateway answered a step: each answer's status, and the last one's body.
#[derive(Debug, Default)]
pub struct Answered {
    pub statuses: Vec<u16>,
    pub body: Value,
}

pub async fn perform(rig: &mut Rig, step: &Step) -> Result<Answered, String> {
    let repeat = step.repeat;
    match &step.action {
        Action::Chat(chat) => providers::whatsapp(rig, chat, repeat).await,
        Action::Hook(hook) => hook_call(rig, hook, repeat).await,
        Action::Twilio(chat) => providers::twilio(rig, chat, repeat).await,
        Action::Standard(delivery) => providers::standard(rig, delivery, repeat).await,
        Action::Api(call) => api_call(rig, call).await,
        Action::Executor(mode) => {
            rig.executor.set_mode(*mode);
            Ok(Answered::default())
        }
        Action::WaitMs(ms) => {
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            Ok(Answered::default())
        }
        Action::Restart(_) => {
            rig.restart().await?;
            Ok(Answered::default())
        }
    }
}

/// `request` made as many times as `repeat` says, and sent.
pub(super) async fn send_repeated(
    request: impl Fn() -> reqwest::RequestBuilder,
    repeat: Repeat,
) -> Result<Answered, String> {
    send_all((0..repeat.times).map(|_| request()).collect(), repeat.concurrent).await
}

/// Sends `requests` one after another, or all at once.
pub(super) async fn send_all(requests: Vec<reqwest::RequestBuilder>, concurrent: bool) -> Result<Answered, String> {
    let mut responses = vec![];
    if concurrent {
        responses = join_all(requests.into_iter().map(reqwest::RequestBuilder::send)).await;
    } else {
        for request in requests {
            responses.push(request.send().await);
        }
    }
    let mut answered = Answered::default();
    for response in responses {
        let response = response.map_err(|e| format!("the gateway did not answer: {e}"))?;
        answered.statuses.push(response.status().as_u16());
        let text = response.text().await.unwrap_or_default();
        answered.body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    }
    Ok(answered)
}

async fn hook_call(rig: &Rig, hook: &Hook, repeat: Repeat) -> Result<Answered, String> {
    let token = rig.settings.config.hooks.token.expose().to_owned();
    let request = || {
        let request = rig.client.post(rig.url(&hook.path)).bearer_auth(&token).json(&hook.body);
        hook.headers.iter().fold(request, |request, (name, value)| request.header(name, value))
    };
    send_repeated(request, repeat).await
}

async fn api_call(rig: &mut Rig, call: &ApiCall) -> Result<Answered, String> {
    let path = with_approvals(rig, &call.path).await?;
    let path = with_ids(rig, &path)?;
    let method = reqwest::Method::from_bytes(call.method.to_ascii_uppercase().as_bytes())
        .map_err(|_| format!("`{}` is not an HTTP method", call.method))?;
    let token =
        rig.token_as(&call.scopes, call.as_person.as_deref().map_or(OPERATOR, crate::cli::conformance::rig::person))?;
    let mut request = rig.client.request(method, rig.url(&path)).bearer_auth(token);
    if let Some(key) = &call.idempotency_key {
        request = request.header("idempotency-key", key);
    }
    if let Some(name) = &call.operator_step_up {
        request = request.header("step-up", rig.step_up_as(name, Some(OPERATOR)).await?);
    }
    let body = match (&call.step_up_for, &call.step_up_again) {
        (Some(name), _) => {
            let proof = rig.step_up_as(name, None).await?;
            rig.proofs.insert(name.clone(), proof.clone());
            Some(json!({"token": proof}))
        }
        (None, Some(name)) => {
            let proof = rig.proofs.get(name).ok_or_else(|| format!("no proof was minted for `{name}`"))?;
            Some(json!({"token": proof}))
        }
        (None, None) => call.body.clone(),
    };
    if let Some(body) = body {
        request = request.json(&body);
    }
    send_all(vec![request], false).await
}

/// `path` with each `{approval:name}` replaced by the id of the approval that command waits for.
async fn with_approvals(rig: &mut Rig, path: &str) -> Result<String, String> {
    let mut path = path.to_owned();
    while let Some(start) = path.find("{approval:") {
        let end = path[start..].find('}').ok_or_else(|| format!("`{path}`: an unclosed `{{`"))? + start;
        let id = rig.approval_of(&path[start + "{approval:".len()..end]).await?;
        path.replace_range(start..=end, &id.to_string());
    }
    Ok(path)
}

/// `path` with each `{name}` replaced by the id of the command of that name.
fn with_ids(rig: &Rig, path: &str) -> Result<String, String> {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let end = rest[start..].find('}').ok_or_else(|| format!("`{path}`: an unclosed `{{`"))? + start;
        out.push_str(&rest[..start]);
        out.push_str(&rig.id_of(&rest[start + 1..end])?.to_string());
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
