//! The two handlers chatgate's ingest is measured against, in the same run and with the same load:
//! the bare handler (the same HMAC check and the same parser, nothing stored) and the durable inbox
//! (the same, plus one row per webhook made durable in SQLite — WAL, `synchronous = FULL`, so a
//! commit is an fsync — by group commit: one writer takes every row waiting, writes them in one
//! transaction, and only then are their webhooks answered). The second is what acknowledging "at
//! the speed of the disk" can cost on this machine.

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use chatgate::channels::whatsapp::{payload, signature};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use super::SECRET;

/// The most rows one commit takes (two parameters each, far under SQLite's limit).
const BATCH: usize = 1_024;

/// The bare handler: the same signature check and the same parser, nothing stored.
pub async fn bare(headers: HeaderMap, body: Bytes) -> StatusCode {
    match verified(&headers, &body) {
        Ok(_) => StatusCode::OK,
        Err(status) => status,
    }
}

fn verified(headers: &HeaderMap, body: &[u8]) -> Result<payload::Delivery, StatusCode> {
    let header = headers.get(signature::HEADER).map(|v| v.as_bytes());
    signature::verify(SECRET.as_bytes(), header, body).map_err(|_| StatusCode::UNAUTHORIZED)?;
    payload::parse(body).map_err(|_| StatusCode::BAD_REQUEST)
}

/// One row waiting for the writer, and who waits for its commit.
type Pending = (String, Vec<u8>, oneshot::Sender<bool>);

/// The durable-inbox handler's router, its SQLite file in `dir`.
pub async fn durable_inbox(dir: &std::path::Path) -> anyhow::Result<Router> {
    let options = SqliteConnectOptions::new()
        .filename(dir.join("inbox.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full);
    let mut connection = SqliteConnection::connect_with(&options).await?;
    sqlx::query("CREATE TABLE inbox (provider_id TEXT PRIMARY KEY, body BLOB NOT NULL)")
        .execute(&mut connection)
        .await?;
    let (sender, receiver) = mpsc::channel::<Pending>(BATCH * 8);
    tokio::spawn(write(connection, receiver));
    Ok(Router::new().route("/webhooks/whatsapp", post(inbox)).with_state(sender))
}

async fn inbox(State(writer): State<mpsc::Sender<Pending>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let delivery = match verified(&headers, &body) {
        Ok(delivery) => delivery,
        Err(status) => return status,
    };
    let id = delivery.messages.first().map(|m| m.provider_message_id.to_string()).unwrap_or_default();
    let (done, committed) = oneshot::channel();
    if writer.send((id, body.to_vec(), done)).await.is_err() {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    match committed.await {
        Ok(true) => StatusCode::OK,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The group-commit writer: every row waiting, in one transaction, then every webhook answered.
async fn write(mut connection: SqliteConnection, mut rows: mpsc::Receiver<Pending>) {
    let mut batch: Vec<Pending> = Vec::with_capacity(BATCH);
    while rows.recv_many(&mut batch, BATCH).await > 0 {
        let committed = commit(&mut connection, &batch).await.is_ok();
        for (_, _, done) in batch.drain(..) {
            let _ = done.send(committed);
        }
    }
}

async fn commit(connection: &mut SqliteConnection, batch: &[Pending]) -> Result<(), sqlx::Error> {
    let mut builder = sqlx::QueryBuilder::new("INSERT OR IGNORE INTO inbox (provider_id, body) ");
    builder.push_values(batch, |mut row, (id, body, _)| {
        row.push_bind(id.as_str()).push_bind(body.as_slice());
    });
    let mut transaction = connection.begin().await?;
    builder.build().execute(&mut *transaction).await?;
    tokio::time::timeout(Duration::from_secs(10), transaction.commit()).await.map_err(|_| sqlx::Error::PoolTimedOut)?
}
