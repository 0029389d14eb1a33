//! A stand-in for a tenant's identity resolver: a real HTTP server on a free port that checks
//! each request's Standard Webhooks signature, records it, and answers from the people it was
//! given — or, as the test sets it, slowly (past the gateway's timeout) or not at all (503).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub const SECRET: &str = "whsec_cmVzb2x2ZXItdGVzdC1zZWNyZXQ=";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Answering,
    /// Answers after this long (past the gateway's timeout).
    Slow(Duration),
    /// 503 to every request.
    Down,
}

#[derive(Default)]
struct Book {
    people: HashMap<String, Value>,
    mode: Option<Mode>,
    requests: Vec<Value>,
    bad_signatures: u32,
}

#[derive(Clone)]
pub struct FakeResolver {
    pub url: String,
    book: Arc<Mutex<Book>>,
}

impl FakeResolver {
    pub async fn start() -> Self {
        let book = Arc::new(Mutex::new(Book::default()));
        let app = Router::new().route("/who", axum::routing::post(answer)).with_state(book.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port");
        let url = format!("http://{}/who", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        Self { url, book }
    }

    /// The resolver knows `address` as `person` (`{"id", "name", "roles"}`).
    pub fn knows(&self, address: &str, person: Value) {
        self.book.lock().expect("book").people.insert(address.to_owned(), person);
    }

    pub fn set(&self, mode: Mode) {
        self.book.lock().expect("book").mode = Some(mode);
    }

    pub fn requests(&self) -> Vec<Value> {
        self.book.lock().expect("book").requests.clone()
    }

    pub fn bad_signatures(&self) -> u32 {
        self.book.lock().expect("book").bad_signatures
    }

    /// The directory section that points a tenant at this resolver.
    pub fn section(&self, tenant: &str, timeout_ms: u64, give_up_after: &str) -> String {
        format!(
            "\n[tenants.{tenant}.resolver]\nurl = \"{}\"\nsecret = \"{SECRET}\"\ntimeout_ms = {timeout_ms}\n\
             known_ttl = \"1h\"\nunknown_ttl = \"1h\"\ngive_up_after = \"{give_up_after}\"\n",
            self.url
        )
    }
}

async fn answer(State(book): State<Arc<Mutex<Book>>>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signed = chatgate::domain::standard_webhooks::Signed {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let verified = chatgate::domain::standard_webhooks::verify([SECRET], 300, signed, &body, now);
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (mode, person) = {
        let mut book = book.lock().expect("book");
        if verified.is_err() {
            book.bad_signatures += 1;
            return StatusCode::UNAUTHORIZED.into_response();
        }
        book.requests.push(request.clone());
        let person = request["address"].as_str().and_then(|a| book.people.get(a).cloned());
        (book.mode.unwrap_or(Mode::Answering), person)
    };
    match mode {
        Mode::Down => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
        Mode::Slow(delay) => tokio::time::sleep(delay).await,
        Mode::Answering => {}
    }
    match person {
        Some(mut person) => {
            person["known"] = json!(true);
            axum::Json(person).into_response()
        }
        None => axum::Json(json!({"known": false})).into_response(),
    }
}
