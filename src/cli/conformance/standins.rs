//! The runner's own stand-ins, on ports of their own: an executor that does a command's work
//! once per idempotency key (as the executor contract asks) and answers as the scenario says, and
//! the provider's messaging API (Meta's Graph API), which takes the gateway's replies and counts
//! them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::cli::conformance::scenario::ExecutorMode;

#[derive(Debug)]
struct Ledger {
    mode: ExecutorMode,
    done: HashSet<String>,
    /// How many times the world it previews changed: a preview names the version it saw.
    world: u32,
}

/// The stand-in executor: `POST` anything, `Idempotency-Key` names the work.
#[derive(Clone)]
pub struct StandInExecutor {
    pub url: String,
    ledger: Arc<Mutex<Ledger>>,
}

impl StandInExecutor {
    pub async fn start() -> std::io::Result<Self> {
        let ledger = Arc::new(Mutex::new(Ledger { mode: ExecutorMode::Succeed, done: HashSet::new(), world: 0 }));
        let answering = ledger.clone();
        let app = Router::new().fallback(move |headers: HeaderMap, body: axum::body::Bytes| {
            let ledger = answering.clone();
            async move { answer(&ledger, &headers, &body) }
        });
        let url = serve(app).await?;
        Ok(Self { url, ledger })
    }

    pub fn set_mode(&self, mode: ExecutorMode) {
        let mut ledger = lock(&self.ledger);
        if mode == ExecutorMode::WorldChanges {
            ledger.world += 1;
        }
        ledger.mode = mode;
    }

    /// Work done so far: one per idempotency key it succeeded for.
    pub fn executions(&self) -> u64 {
        lock(&self.ledger).done.len() as u64
    }
}

type Response = axum::http::Response<Body>;

fn answer(ledger: &Mutex<Ledger>, headers: &HeaderMap, body: &[u8]) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let key = header("idempotency-key");
    let envelope: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let mut ledger = lock(ledger);
    // The preview phase (docs/REFERENCE.md, "The executor contract"): what the world is now.
    let now = json!({"summary": format!("the order as of version {}", ledger.world)});
    if header("x-chatgate-phase") == "preview" {
        let answer = json!({"command_id": envelope["command_id"], "status": "preview", "preview": now});
        return json_answer(StatusCode::OK, &answer);
    }
    if envelope.get("preview").is_some_and(|confirmed| confirmed["summary"] != now["summary"]) {
        let error = json!({"code": "stale_preview", "message": "the order changed since it was previewed"});
        return json_answer(StatusCode::OK, &json!({"status": "failed", "error": error}));
    }
    match ledger.mode {
        ExecutorMode::WaitForApproval => {
            if envelope["approval"]["decision"] == "approved" {
                ledger.done.insert(key);
                return json_answer(StatusCode::OK, &json!({"status": "succeeded", "result": {"done": true}}));
            }
            json_answer(StatusCode::OK, &json!({"status": "waiting", "waiting": {"reason": "approval_required"}}))
        }
        ExecutorMode::Succeed | ExecutorMode::WorldChanges => {
            ledger.done.insert(key);
            json_answer(StatusCode::OK, &json!({"status": "succeeded", "result": {"done": true}}))
        }
        ExecutorMode::Fail => {
            let error = json!({"code": "refused_by_executor", "message": "the stand-in fails", "retryable": false});
            json_answer(StatusCode::OK, &json!({"status": "failed", "error": error}))
        }
        ExecutorMode::Unavailable => json_answer(StatusCode::SERVICE_UNAVAILABLE, &json!({"error": "unavailable"})),
        ExecutorMode::Accept => json_answer(StatusCode::ACCEPTED, &json!({"status": "accepted"})),
    }
}

/// A JSON answer, as an executor or the Graph API sends it.
fn json_answer(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", axum::http::HeaderValue::from_static("application/json"));
    response
}

/// The stand-in Graph API: every message the gateway sends is taken and counted.
#[derive(Clone)]
pub struct StandInProvider {
    pub url: String,
    sent: Arc<Mutex<u64>>,
}

impl StandInProvider {
    pub async fn start() -> std::io::Result<Self> {
        let sent = Arc::new(Mutex::new(0_u64));
        let counting = sent.clone();
        let app = Router::new().fallback(move || {
            let sent = counting.clone();
            async move {
                let n = {
                    let mut sent = lock(&sent);
                    *sent += 1;
                    *sent
                };
                let sent = json!({"messaging_product": "whatsapp", "messages": [{"id": format!("wamid.OUT{n}")}]});
                json_answer(StatusCode::OK, &sent)
            }
        });
        let url = serve(app).await?;
        Ok(Self { url, sent })
    }

    pub fn sent(&self) -> u64 {
        *lock(&self.sent)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn serve(app: Router) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}
