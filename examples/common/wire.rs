//! A relay between the gateway and PostgreSQL that counts what the gateway asks of it, read off
//! the wire (PostgreSQL's frontend protocol, version 3): every `Execute` of a prepared statement,
//! every `Parse` (a statement's text the server parses and plans: once per connection for a
//! statement kept prepared, at each use for one that is not) and every simple `Query` (sqlx sends
//! `BEGIN`, `COMMIT` and `ROLLBACK` that way), and every `Sync` that ends no extended query: a
//! round trip that asks for nothing (sqlx's test of a connection, `ping`). The server's
//! own `pg_stat_statements` would say the same, but it must be loaded when the server starts;
//! this needs nothing of the server. The relay costs the machine a copy of every byte, so a run
//! that counts is for the counts, not for the rates.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

type ClientIn = BufReader<OwnedReadHalf>;
type ServerOut = BufWriter<OwnedWriteHalf>;

/// The protocol's codes for an untyped first message that is not the startup itself (the client
/// sends its startup again after the server's one-byte answer).
const SSL_REQUEST: i32 = 80_877_103;
const GSS_REQUEST: i32 = 80_877_104;

/// What the gateway has asked of PostgreSQL so far, over every connection.
#[derive(Clone, Default)]
pub struct Asked {
    executes: Arc<AtomicU64>,
    parses: Arc<AtomicU64>,
    queries: Arc<AtomicU64>,
    pings: Arc<AtomicU64>,
}

/// The counts of [`Asked`] at one moment, or between two.
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    /// Statements executed.
    pub executes: u64,
    /// Statements parsed.
    pub parses: u64,
    /// Simple queries.
    pub queries: u64,
    /// Round trips that asked for nothing.
    pub pings: u64,
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, before: Counts) -> Counts {
        Counts {
            executes: self.executes - before.executes,
            parses: self.parses - before.parses,
            queries: self.queries - before.queries,
            pings: self.pings - before.pings,
        }
    }
}

impl Asked {
    /// The counts so far.
    pub fn read(&self) -> Counts {
        let read = |count: &AtomicU64| count.load(Ordering::Relaxed);
        Counts {
            executes: read(&self.executes),
            parses: read(&self.parses),
            queries: read(&self.queries),
            pings: read(&self.pings),
        }
    }
}

/// Relays connections on a port of its own to `server`: the port, and the counts.
pub async fn relay(server: SocketAddr) -> anyhow::Result<(u16, Asked)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let asked = Asked::default();
    let counting = asked.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let asked = counting.clone();
            tokio::spawn(async move {
                if let Ok(upstream) = TcpStream::connect(server).await {
                    let _ = connect(client, upstream, asked).await;
                }
            });
        }
    });
    Ok((port, asked))
}

async fn connect(client: TcpStream, upstream: TcpStream, asked: Asked) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    upstream.set_nodelay(true)?;
    let (from_client, mut to_client) = client.into_split();
    let (mut from_server, to_server) = upstream.into_split();
    let answers = tokio::spawn(async move { tokio::io::copy(&mut from_server, &mut to_client).await });
    let (from, to) = (BufReader::with_capacity(1 << 16, from_client), BufWriter::with_capacity(1 << 16, to_server));
    let asked = count(from, to, &asked).await;
    answers.abort();
    asked
}

/// Forwards the client's messages one by one, counting the kinds that ask for work; what the
/// client sent together leaves together (a flush whenever nothing more is buffered).
async fn count(mut from: ClientIn, mut to: ServerOut, asked: &Asked) -> std::io::Result<()> {
    loop {
        let code = forward_untyped(&mut from, &mut to).await?;
        to.flush().await?;
        if code != SSL_REQUEST && code != GSS_REQUEST {
            break;
        }
    }
    // Whether an extended query (Parse, Bind, Describe, Execute, Close) waits for its Sync.
    let mut extended = false;
    loop {
        let kind = from.read_u8().await?;
        match kind {
            b'E' => asked.executes.fetch_add(1, Ordering::Relaxed),
            b'P' => asked.parses.fetch_add(1, Ordering::Relaxed),
            b'Q' => asked.queries.fetch_add(1, Ordering::Relaxed),
            b'S' if !extended => asked.pings.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        extended = matches!(kind, b'P' | b'B' | b'D' | b'E' | b'C');
        to.write_u8(kind).await?;
        forward_body(&mut from, &mut to).await?;
        if from.buffer().is_empty() {
            to.flush().await?;
        }
    }
}

/// A message without a kind byte (the startup, or a request for encryption): its code.
async fn forward_untyped(from: &mut ClientIn, to: &mut ServerOut) -> std::io::Result<i32> {
    let length = from.read_i32().await?;
    let code = from.read_i32().await?;
    to.write_i32(length).await?;
    to.write_i32(code).await?;
    copy_exactly(from, to, length - 8).await?;
    Ok(code)
}

/// A message's length (which counts itself) and the rest of it.
async fn forward_body(from: &mut ClientIn, to: &mut ServerOut) -> std::io::Result<()> {
    let length = from.read_i32().await?;
    to.write_i32(length).await?;
    copy_exactly(from, to, length - 4).await
}

/// A message's rest, by reading it whole (`tokio::io::copy` would flush after each).
async fn copy_exactly(from: &mut ClientIn, to: &mut ServerOut, bytes: i32) -> std::io::Result<()> {
    let bytes = usize::try_from(bytes).map_err(|_| std::io::Error::other("a negative message length"))?;
    let mut body = vec![0; bytes];
    from.read_exact(&mut body).await?;
    to.write_all(&body).await
}
