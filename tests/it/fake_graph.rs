//! Stand-ins for the servers chatgate calls: real HTTP servers on free ports that record every
//! request and answer from a script the test sets, else with their default — Meta's Graph API
//! (200 with a new `wamid`), Twilio's Messages API (201 with a new sid) or an executor (a
//! test-chosen answer, 202 "result later" unless set).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    pub body: Value,
    /// The body as sent, byte for byte.
    pub raw: String,
    pub at: Instant,
    /// The `wamid` answered, when the answer was a success.
    pub wamid: Option<String>,
    /// Every header, by lower-case name.
    pub headers: std::collections::BTreeMap<String, String>,
}

/// A scripted answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<String>,
}

/// The answer when the script is empty, given the request's number (from 1).
type Default = fn(usize) -> Answer;

struct Inner {
    requests: Vec<Recorded>,
    script: VecDeque<Answer>,
    default: Default,
}

#[derive(Clone)]
pub struct FakeServer {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

/// Meta's Graph API.
pub type FakeGraph = FakeServer;

fn graph_default(n: usize) -> Answer {
    Answer {
        status: 200,
        body: json!({"messaging_product": "whatsapp", "messages": [{"id": format!("wamid.OUT{n}")}]}),
        retry_after: None,
    }
}

fn twilio_default(n: usize) -> Answer {
    Answer { status: 201, body: json!({"sid": format!("SMOUT{n}"), "status": "queued"}), retry_after: None }
}

fn executor_default(_: usize) -> Answer {
    Answer { status: 202, body: json!({}), retry_after: None }
}

impl FakeServer {
    /// A stand-in for the Graph API.
    pub async fn start() -> Self {
        Self::start_with(graph_default).await
    }

    /// A stand-in for Twilio's Messages API: 201 with a new message sid.
    pub async fn twilio() -> Self {
        Self::start_with(twilio_default).await
    }

    /// A stand-in for an HTTP executor: "accepted, the result comes later" unless scripted.
    pub async fn executor() -> Self {
        Self::start_with(executor_default).await
    }

    /// A stand-in for an HTTP executor that does the work and says so at once.
    pub async fn succeeding_executor() -> Self {
        Self::start_with(|_| Answer {
            status: 200,
            body: json!({"status": "succeeded", "result": {"state": "shipped"}}),
            retry_after: None,
        })
        .await
    }

    pub async fn start_with(default: Default) -> Self {
        let inner = Arc::new(Mutex::new(Inner { requests: vec![], script: VecDeque::new(), default }));
        let app = Router::new().fallback(record).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("free port");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url: format!("http://{addr}"), inner }
    }

    /// The next request gets this answer (answers queue up in order).
    pub fn answer_next(&self, status: u16, body: Value, retry_after: Option<&str>) {
        let answer = Answer { status, body, retry_after: retry_after.map(str::to_owned) };
        self.inner.lock().expect("lock").script.push_back(answer);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().expect("lock").requests.clone()
    }

    /// Waits until `n` requests have come (or fails after `within`).
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Recorded> {
        let deadline = Instant::now() + within;
        loop {
            let requests = self.requests();
            if requests.len() >= n {
                return requests;
            }
            assert!(Instant::now() < deadline, "expected {n} requests to the Graph API, got {}", requests.len());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for `n` requests, then a little longer to see that no more come.
    pub async fn exactly(&self, n: usize) -> Vec<Recorded> {
        self.wait_for(n, Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let requests = self.requests();
        assert_eq!(
            requests.len(),
            n,
            "exactly {n} requests: {:#?}",
            requests.iter().map(|r| &r.body).collect::<Vec<_>>()
        );
        requests
    }
}

async fn record(State(inner): State<Arc<Mutex<Inner>>>, uri: Uri, headers: HeaderMap, body: String) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let mut inner = inner.lock().expect("lock");
    let n = inner.requests.len() + 1;
    let default = inner.default;
    let answer = inner.script.pop_front().unwrap_or_else(|| default(n));
    let wamid = (answer.status == 200).then(|| answer.body["messages"][0]["id"].as_str().map(str::to_owned)).flatten();
    inner.requests.push(Recorded {
        path: uri.path().to_owned(),
        authorization: header("authorization"),
        content_type: header("content-type"),
        body: serde_json::from_str(&body).unwrap_or(Value::String(body.clone())),
        raw: body,
        at: Instant::now(),
        wamid,
        headers: headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
            .collect(),
    });
    let status = StatusCode::from_u16(answer.status).expect("status");
    let mut response = (status, axum::Json(answer.body)).into_response();
    if let Some(retry_after) = answer.retry_after {
        response.headers_mut().insert("retry-after", retry_after.parse().expect("header value"));
    }
    response
}

/// The test configuration of a gateway that sends through `graph`, quickly.
pub fn sending_through(config: &chatgate::config::Config, graph: &FakeGraph) -> chatgate::config::Config {
    let mut config = config.clone();
    config.whatsapp.api_base = graph.url.clone();
    config.whatsapp.access_token = chatgate::config::Secret::new("test-access-token");
    config.outbound.poll_interval_ms = 20;
    config.outbound.backoff_initial_ms = 50;
    config.outbound.backoff_max_ms = 5_000;
    config.outbound.confirmation_sweep_ms = 50;
    config
}

/// The text a person reads in a recorded message (plain or interactive).
pub fn text_of(body: &Value) -> String {
    body["text"]["body"].as_str().or(body["interactive"]["body"]["text"].as_str()).unwrap_or_default().to_owned()
}
