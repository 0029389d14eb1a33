//! What a statement's trip to SQLite costs, apart from the statement's own work (issue #49).
//!
//! The store runs every SQLite statement through sqlx, whose connection lives on a thread of its
//! own: each statement is a message to that thread and its rows a message back, so a task that
//! waits for them sleeps and is woken, and so does the thread. Here the same transaction (a few
//! inserts into an indexed table and a read by key, as the pipeline's are) runs three ways, one
//! transaction at a time, as a steady rate leaves them, and the process's CPU and context switches
//! are counted for each way:
//!
//! - `any`: as the store runs them today (`sqlx::AnyPool`, statement by statement);
//! - `native`: sqlx's SQLite driver without the `Any` layer (statement by statement still);
//! - `one-call`: the whole transaction as one closure on a thread that owns the connection
//!   (`rusqlite`), the task waiting once: the design the store would move to.
//!
//! `synchronous = NORMAL` in WAL mode by default: commits do not wait for the disk, so what is
//! measured is the CPU around the statements, not the flush (the same in each way);
//! `--synchronous FULL` commits as the gateway does.
//!
//! ```text
//! cargo run --release --example hops -- --transactions 3000 --statements 12
//! ```

use std::path::Path;
use std::time::Instant;

use clap::Parser;
use sqlx::any::AnyPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

#[derive(Parser)]
struct Args {
    /// Transactions run in each way, one after another.
    #[arg(long, default_value_t = 3_000)]
    transactions: usize,
    /// Statements in each transaction besides BEGIN and COMMIT: inserts, then one read.
    #[arg(long, default_value_t = 12)]
    statements: usize,
    /// Times each way is measured (alternated), each on a fresh file.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// `FULL`: each commit waits for the disk, as the gateway's do (its CPU then counted too).
    #[arg(long, default_value = "NORMAL", value_parser = ["NORMAL", "FULL"])]
    synchronous: String,
}

const SCHEMA: [&str; 2] = [
    "CREATE TABLE items (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, body TEXT NOT NULL, at INTEGER NOT NULL)",
    "CREATE INDEX items_at ON items (at)",
];
const INSERT: &str = "INSERT INTO items (key, body, at) VALUES (?1, ?2, ?3)";
const READ: &str = "SELECT body FROM items WHERE key = ?1";
/// Every inserted row's body.
const BODY: &str = "a body of some length";

/// The whole process's CPU (µs) and context switches (every thread's) so far.
fn usage() -> (f64, i64) {
    // SAFETY: getrusage only writes the struct it is given.
    let mut used: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut used) };
    let micros = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    (micros(used.ru_utime) + micros(used.ru_stime), used.ru_nvcsw + used.ru_nivcsw)
}

fn key(transaction: usize, statement: usize) -> String {
    format!("{transaction:08}-{statement:04}-{}", "k".repeat(40))
}

/// The transactions through sqlx, statement by statement, on a pool of either driver (a macro:
/// the two pools' types share no trait that binds these values).
macro_rules! statement_by_statement {
    ($pool:expr, $args:expr) => {
        async {
            for t in 0..$args.transactions {
                let mut tx = $pool.begin_with("BEGIN IMMEDIATE").await?;
                for s in 0..$args.statements - 1 {
                    let query = sqlx::query(INSERT).bind(key(t, s)).bind(BODY).bind(t as i64);
                    query.execute(&mut *tx).await?;
                }
                let _: Option<String> = sqlx::query_scalar(READ).bind(key(t, 0)).fetch_optional(&mut *tx).await?;
                tx.commit().await?;
            }
            Ok(())
        }
    };
}

async fn any_way(file: &Path, args: &Args) -> anyhow::Result<()> {
    sqlx::any::install_default_drivers();
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let pool = AnyPoolOptions::new().max_connections(1).connect(&url).await?;
    sqlx::query("PRAGMA journal_mode = WAL").execute(&pool).await?;
    let synchronous = format!("PRAGMA synchronous = {}", args.synchronous);
    sqlx::query(sqlx::AssertSqlSafe(synchronous)).execute(&pool).await?;
    for statement in SCHEMA {
        sqlx::query(statement).execute(&pool).await?;
    }
    measure("any", args, || statement_by_statement!(pool, args)).await
}

async fn native_way(file: &Path, args: &Args) -> anyhow::Result<()> {
    let options = SqliteConnectOptions::new()
        .filename(file)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(args.synchronous.parse::<SqliteSynchronous>()?);
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(options).await?;
    for statement in SCHEMA {
        sqlx::query(statement).execute(&pool).await?;
    }
    measure("native", args, || statement_by_statement!(pool, args)).await
}

/// A transaction for the connection's own thread to run whole.
type Work = Box<dyn FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<()> + Send>;

/// A transaction sent to the connection's thread, and where its outcome goes.
type Sent = (Work, tokio::sync::oneshot::Sender<rusqlite::Result<()>>);

/// A thread that owns `file`'s connection and runs each transaction sent to it as one call.
fn connection_thread(file: &Path, synchronous: &str) -> anyhow::Result<std::sync::mpsc::Sender<Sent>> {
    let mut connection = rusqlite::Connection::open(file)?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", synchronous)?;
    for statement in SCHEMA {
        connection.execute(statement, [])?;
    }
    let (sender, work) = std::sync::mpsc::channel::<Sent>();
    std::thread::spawn(move || {
        for (run, done) in work {
            let _ = done.send(run(&mut connection));
        }
    });
    Ok(sender)
}

async fn one_call_way(file: &Path, args: &Args) -> anyhow::Result<()> {
    let thread = connection_thread(file, &args.synchronous)?;
    let statements = args.statements;
    measure("one-call", args, || async {
        for t in 0..args.transactions {
            let work: Work = Box::new(move |connection| {
                let tx = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                for s in 0..statements - 1 {
                    tx.prepare_cached(INSERT)?.execute(rusqlite::params![key(t, s), BODY, t as i64])?;
                }
                let _: Option<String> = tx.prepare_cached(READ)?.query_row([key(t, 0)], |row| row.get(0)).ok();
                tx.commit()
            });
            let (done, answer) = tokio::sync::oneshot::channel();
            thread.send((work, done)).map_err(|_| anyhow::anyhow!("the connection's thread stopped"))?;
            answer.await??;
        }
        Ok(())
    })
    .await
}

/// Runs `transactions`, then prints what each transaction and each statement cost.
async fn measure<F, Fut>(way: &str, args: &Args, transactions: F) -> anyhow::Result<()>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let (cpu, switches) = usage();
    let started = Instant::now();
    transactions().await?;
    let elapsed = started.elapsed();
    let (cpu_after, switches_after) = usage();
    let n = args.transactions as f64;
    let per_statement = (args.statements + 2) as f64;
    println!(
        "{way:>8}: {:>6.1} µs CPU and {:>5.1} context switches per transaction ({:>5.1} µs, {:.1} switches per \
         statement, BEGIN and COMMIT counted); {:.0} transactions/s",
        (cpu_after - cpu) / n,
        (switches_after - switches) as f64 / n,
        (cpu_after - cpu) / n / per_statement,
        (switches_after - switches) as f64 / n / per_statement,
        n / elapsed.as_secs_f64(),
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.statements >= 2, "--statements: at least one insert and the read");
    for round in 1..=args.rounds {
        println!("round {round}: {} transactions of {} statements", args.transactions, args.statements);
        let dir = tempfile::tempdir()?;
        any_way(&dir.path().join("any.db"), &args).await?;
        native_way(&dir.path().join("native.db"), &args).await?;
        one_call_way(&dir.path().join("one-call.db"), &args).await?;
    }
    Ok(())
}
