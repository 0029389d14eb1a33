//! What the store's pools share: how a connection is tested as it is handed out, and their
//! connections opened at start, on the runtime that will use them.

use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Connection};

use crate::store::StoreError;

/// How long a connection may have been idle and still be handed out untested. sqlx tests every
/// connection as it comes back to the pool (a ping on its release), so one used this recently was
/// answering a moment ago; testing it again on acquire (sqlx's default) cost each transaction and
/// each read on PostgreSQL one more round trip to the server (issue #49). Idle longer, it is
/// pinged first, as HikariCP's `aliveBypassWindowMs` (500 ms) does; a server that ended one
/// within the window fails its first statement with an I/O error, which callers retry (503).
const TESTED_RECENTLY: Duration = Duration::from_secs(1);

/// A pool's options, whatever its database: a connection is handed out untested when it was
/// tested within [`TESTED_RECENTLY`], and never while a transaction is open on it (SQLite after
/// a full disk rolls back by itself, and the driver's ROLLBACK then fails: such a connection would
/// refuse every later `begin`, so it is closed instead and the pool opens a fresh one).
pub(super) fn options() -> AnyPoolOptions {
    options_testing_after(TESTED_RECENTLY)
}

/// As [`options`], a connection idle for `idle` or longer tested before it is handed out.
fn options_testing_after(idle: Duration) -> AnyPoolOptions {
    AnyPoolOptions::new().test_before_acquire(false).before_acquire(move |conn, meta| {
        Box::pin(async move {
            if meta.idle_for >= idle {
                conn.ping().await?;
            }
            Ok(!conn.is_in_transaction())
        })
    })
}

/// Opens `size` connections of `pool` now, on this runtime. A connection belongs to the runtime
/// that opens it: a PostgreSQL socket is driven by its reactor, a SQLite connection is a thread
/// with the priority of the thread that started it.
pub(super) async fn every_connection(pool: &AnyPool, size: u32) -> Result<(), StoreError> {
    let mut opened = Vec::with_capacity(size as usize);
    for _ in 0..size {
        let connection = pool.acquire().await;
        opened.push(connection.map_err(|e| StoreError::Unavailable(format!("cannot open a connection: {e}")))?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sqlx::AnyConnection;

    use super::*;

    /// How long the test waits for a state it needs before it fails instead of hanging: generous,
    /// for a busy two-core machine.
    const STATE_DEADLINE: Duration = Duration::from_secs(30);

    /// `CHATGATE_TEST_POSTGRES_URL`: a connection the server ended while it sat in the pool is
    /// found out before it is handed out once it has been idle past the window (its caller never
    /// sees it); within the window its one use fails with an error callers retry (503), and the
    /// next use has a fresh connection.
    #[tokio::test]
    async fn a_connection_the_server_ended_is_tested_past_the_window_and_fails_once_within_it() {
        let Ok(url) = std::env::var("CHATGATE_TEST_POSTGRES_URL") else { return };
        sqlx::any::install_default_drivers();
        let mut admin = AnyConnection::connect(&url).await.expect("an admin connection");
        for (window, first_use_fails) in [(Duration::ZERO, false), (Duration::from_secs(3_600), true)] {
            let pool = options_testing_after(window).max_connections(1).connect(&url).await.expect("a pool");
            let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&pool).await.expect("its pid");
            // Back in the pool (tested as it came back) before the server ends it.
            let returned = async {
                while pool.num_idle() < 1 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            };
            tokio::time::timeout(STATE_DEADLINE, returned).await.expect("the connection back in the pool");
            sqlx::query("SELECT pg_terminate_backend($1)").bind(pid).execute(&mut admin).await.expect("ended");
            let alive = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1";
            let gone = async {
                while sqlx::query_scalar::<_, i64>(alive).bind(pid).fetch_one(&mut admin).await.expect("a count") > 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            };
            tokio::time::timeout(STATE_DEADLINE, gone).await.expect("the backend gone");
            let first = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(&pool).await;
            assert_eq!(first.is_err(), first_use_fails, "idle past {window:?}: {first:?}");
            if let Err(error) = first {
                assert!(matches!(StoreError::from(error), StoreError::Unavailable(_)), "retried, never a 500");
            }
            let next: i32 = sqlx::query_scalar("SELECT 1").fetch_one(&pool).await.expect("a fresh connection");
            assert_eq!(next, 1);
            let other: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&pool).await.expect("a pid");
            assert_ne!(other, pid, "the ended connection was replaced");
            pool.close().await;
        }
    }
}
