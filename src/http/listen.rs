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

/// The address a request's connection came from (a proxy's, behind one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// How the server treats connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// A client must have sent its request headers within this.
    pub header_read_timeout: Duration,
    /// Connections served at once; one more is answered 503 and closed.
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// These limits within `open_files` descriptors, `reserve` of which the rest of the process
    /// needs (database connections, calls to executors and providers, files): a connection over
    /// the limit must still find a descriptor to be answered 503 with, instead of waiting in the
    /// kernel's queue while `accept` fails.
    pub fn within(self, open_files: Option<u64>, reserve: usize) -> Self {
        let Some(open_files) = open_files else { return self };
        // Connections being turned away hold a descriptor for a moment too.
        let reserve = reserve + LINGERING;
        let room = usize::try_from(open_files).unwrap_or(usize::MAX).saturating_sub(reserve).max(1);
        if room < self.max_connections {
            tracing::warn!(
                configured = self.max_connections,
                open_files,
                reserve,
                serving = room,
                "server.max_connections lowered to fit the process's file-descriptor limit"
            );
        }
        Self { max_connections: self.max_connections.min(room), ..self }
    }
}

/// Raises the process's soft limit on open files to its hard limit (a shell often starts a process
/// at 1,024 when it may have far more), and returns the limit now in force.
#[cfg(unix)]
pub fn raise_open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed, which lives here.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    Some(limit.rlim_cur).filter(|n| *n != libc::RLIM_INFINITY)
}

#[cfg(not(unix))]
pub fn raise_open_file_limit() -> Option<u64> {
    None
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
         X-Content-Type-Options: nosniff\r\n\
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
    let lingering = Arc::new(Lingering::default());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
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
            tokio::spawn(turn_away(stream, lingering.clone()));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
        let app = app.clone();
        // Each request knows the address it came from (console sign-ins are limited by it).
        let service = tower::service_fn(move |mut request: axum::http::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(PeerAddr(peer));
            tower::ServiceExt::oneshot(app.clone(), request)
        });
        let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
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

/// Answers a connection over the limit and closes it. Its request head is read first (an answer
/// sent before the request is read is refused by clients, and closing a socket with unread bytes
/// resets it): a liveness probe (`GET /healthz`) is told the process is alive — restarting a
/// gateway because it is busy would only make it busier — and anything else 503. A client may take
/// up to `FIRST_BYTE` to start its request (a probe's first request in a process just started, on a
/// busy machine, takes tens of milliseconds); at most `LINGERING` connections wait so, and one
/// more sends the one that has waited longest, without a byte sent, its 503 at once: idle
/// connections, however many, never keep a probe from being read.
async fn turn_away(mut stream: TcpStream, lingering: Arc<Lingering>) {
    use tokio::io::AsyncReadExt;
    metrics::counter!("chatgate_connections_refused_total").increment(1);
    let started = {
        let waiting = lingering.enter();
        let mut first = [0u8; 1];
        tokio::select! {
            peeked = stream.peek(&mut first) => matches!(peeked, Ok(n) if n > 0),
            () = waiting.evicted.notified() => false,
            () = tokio::time::sleep(FIRST_BYTE) => false,
        }
    };
    let mut head = Vec::new();
    let reading = if started { lingering.readers.clone().try_acquire_owned().ok() } else { None };
    if reading.is_some() {
        let mut buffer = [0u8; 2048];
        let read_head = async {
            while head.len() < 8192 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer).await {
                    Ok(n) if n > 0 => head.extend_from_slice(&buffer[..n]),
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(200), read_head).await;
    }
    let whole = head.windows(4).any(|w| w == b"\r\n\r\n");
    let liveness = whole && (head.starts_with(b"GET /healthz ") || head.starts_with(b"GET /healthz?"));
    let answer = if liveness { alive() } else { busy() };
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&answer)).await;
    let _ = stream.shutdown().await;
}

/// How long a connection over the limit may take to start its request.
const FIRST_BYTE: Duration = Duration::from_secs(1);

/// The connections over the limit waiting for their first byte, oldest first (at most
/// `LINGERING`), and the places to read a request head in.
struct Lingering {
    waiting: std::sync::Mutex<std::collections::VecDeque<(u64, Arc<tokio::sync::Notify>)>>,
    next: std::sync::atomic::AtomicU64,
    readers: Arc<Semaphore>,
}

impl Default for Lingering {
    fn default() -> Self {
        Self {
            waiting: std::sync::Mutex::default(),
            next: Default::default(),
            readers: Arc::new(Semaphore::new(LINGERING)),
        }
    }
}

/// One connection's place among the waiting; dropped, it leaves.
struct Waiting<'a> {
    id: u64,
    evicted: Arc<tokio::sync::Notify>,
    of: &'a Lingering,
}

impl Lingering {
    /// A place for one more; when all are taken, the one waiting longest is told to go.
    fn enter(&self) -> Waiting<'_> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let evicted = Arc::new(tokio::sync::Notify::new());
        let mut waiting = self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if waiting.len() >= LINGERING
            && let Some((_, oldest)) = waiting.pop_front()
        {
            oldest.notify_one();
        }
        waiting.push_back((id, evicted.clone()));
        Waiting { id, evicted, of: self }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = self.of.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        waiting.retain(|(id, _)| *id != self.id);
    }
}

/// `/healthz`'s answer, for a probe that came over the connection limit.
fn alive() -> Vec<u8> {
    let body = r#"{"status":"ok"}"#;
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Connections over the limit that may wait for their request to be read before they close.
const LINGERING: usize = 128;
