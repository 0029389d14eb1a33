//! A stand-in executor that does "work" once per idempotency key, as a well-behaved executor
//! does, and misbehaves on a schedule: it answers 500, answers after the gateway's timeout (having
//! done the work), drops the connection, or refuses some orders for good. It counts calls and
//! effects per key, and how many calls for one key ever ran at the same time.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// What the executor does with call number `n` (from 1) of a key it has not applied yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// 500 before doing anything.
    ServerError,
    /// Does the work, then answers after `delay` (longer than the gateway waits).
    SlowAfterWork(Duration),
    /// Closes the connection without an answer.
    Drop,
}

#[derive(Default)]
struct Ledger {
    calls: HashMap<String, u32>,
    effects: HashMap<String, u32>,
    in_flight: HashMap<String, u32>,
    max_in_flight: u32,
    total: u64,
}

#[derive(Clone)]
pub struct FakeExecutor {
    pub url: String,
    ledger: Arc<Mutex<Ledger>>,
}

#[derive(Clone)]
struct Behaviour {
    ledger: Arc<Mutex<Ledger>>,
    schedule: fn(u64) -> Fault,
}

impl FakeExecutor {
    /// `schedule` picks the fault for the executor's `n`-th call overall.
    pub async fn start(schedule: fn(u64) -> Fault) -> Self {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let app = Router::new().fallback(handle).with_state(Behaviour { ledger: ledger.clone(), schedule });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("free port");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url: format!("http://{addr}"), ledger }
    }

    /// Effects per idempotency key.
    pub fn effects(&self) -> BTreeMap<String, u32> {
        self.ledger.lock().expect("lock").effects.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    pub fn calls(&self) -> u64 {
        self.ledger.lock().expect("lock").total
    }

    /// The most calls for one key that were ever running at the same time.
    pub fn max_in_flight_per_key(&self) -> u32 {
        self.ledger.lock().expect("lock").max_in_flight
    }
}

/// Drops the in-flight count when the call ends, however it ends.
struct InFlight {
    ledger: Arc<Mutex<Ledger>>,
    key: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut ledger) = self.ledger.lock()
            && let Some(n) = ledger.in_flight.get_mut(&self.key)
        {
            *n = n.saturating_sub(1);
        }
    }
}

async fn handle(State(behaviour): State<Behaviour>, headers: HeaderMap, body: Bytes) -> Response {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let envelope: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (fault, already) = {
        let mut ledger = behaviour.ledger.lock().expect("lock");
        ledger.total += 1;
        let n = ledger.total;
        *ledger.calls.entry(key.clone()).or_default() += 1;
        let running = ledger.in_flight.entry(key.clone()).or_default();
        *running += 1;
        let running = *running;
        ledger.max_in_flight = ledger.max_in_flight.max(running);
        (((behaviour.schedule)(n)), ledger.effects.contains_key(&key))
    };
    let _in_flight = InFlight { ledger: behaviour.ledger.clone(), key: key.clone() };
    let order = envelope["args"]["order_id"].as_str().unwrap_or_default().to_owned();
    // Some orders cannot be reached at all: 500 every time, nothing done.
    if order.ends_with("99") {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    // Some orders do not exist: refused for good, nothing done.
    if order.ends_with("13") {
        return (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(json!({"error": {"code": "unknown_order"}})))
            .into_response();
    }
    let apply = |ledger: &Arc<Mutex<Ledger>>| {
        let mut ledger = ledger.lock().expect("lock");
        // Honours the idempotency key: the work is done once per key.
        ledger.effects.entry(key.clone()).or_insert(1);
    };
    match fault {
        Fault::ServerError if !already => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        Fault::Drop if !already => {
            // The answer's body breaks off: the connection ends in the middle of it.
            let broken =
                futures_util::stream::once(async { Err::<Bytes, _>(std::io::Error::other("dropped on purpose")) });
            return Response::builder()
                .status(StatusCode::OK)
                .body(axum::body::Body::from_stream(broken))
                .unwrap_or_default();
        }
        Fault::SlowAfterWork(delay) if !already => {
            apply(&behaviour.ledger);
            tokio::time::sleep(delay).await;
        }
        _ => apply(&behaviour.ledger),
    }
    axum::Json(json!({"status": "succeeded", "result": {"order": order}})).into_response()
}
