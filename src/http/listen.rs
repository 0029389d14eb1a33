//! The accept loop: each connection served by hyper with a deadline for its request headers, and
//! at most `server.max_connections` at once. axum's own `serve` sets neither, and 1,100 clients
//! that sent a request line and then nothing held every worker (a slowloris): with these, such a
//! client is dropped when its headers are late, and a connection over the limit is answered 503
//! at once and closed, so `/healthz` and the webhooks keep answering.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// How the server treats connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// A client must have sent its request headers within this.
    pub header_read_timeout: Duration,
    /// Connections served at once; one more is answered 503 and closed.
    pub max_connections: usize,
}

/// What a connection over the limit is told before it is closed: a problem document, as every
/// refusal of ours is.
fn busy() -> Vec<u8> {
    let body = serde_json::json!({
        "type": "urn:chatgate:problem:too_many_connections",
        "title": "Service Unavailable",
        "status": 503,
        "code": "too_many_connections",
        "detail": "Too many connections; retry in a moment.",
    })
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves `app` on `listener` until `shutdown` completes, then lets open connections finish
/// their requests (the caller bounds how long).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors, a reset before accept: the next one may work.
                Err(error) => {
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tokio::spawn(turn_away(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
        let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

async fn turn_away(mut stream: TcpStream) {
    metrics::counter!("chatgate_connections_refused_total").increment(1);
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&busy())).await;
    let _ = stream.shutdown().await;
}
