//! Gives freed memory back to the system. glibc's allocator keeps what a burst freed in its
//! per-thread arenas: after 970 webhooks/s on 256 connections the gateway stayed at its peak for
//! as long as it was idle. Every few seconds, when the heap has something to return, this asks the
//! allocator to return it (`malloc_trim`); elsewhere it does nothing. And it keeps the arenas few
//! (`limit_arenas`): each one holds its own free memory, and glibc makes up to eight per core.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub(super) async fn run(every: Duration, stopping: CancellationToken) {
    crate::workers::periodically(every, stopping, || async {
        // It walks the arenas; off the async threads, as any blocking call.
        let _ = tokio::task::spawn_blocking(trim).await;
    })
    .await;
}

/// The arenas glibc may make unless `MALLOC_ARENA_MAX` says otherwise: with two, the benchmark's
/// peak fell from 66 to 57 MB on SQLite at the same throughput; with one, ingest was slower
/// (docs/BENCHMARKS.md).
const ARENAS: i32 = 2;

/// The arena limit to set: none when the operator set `MALLOC_ARENA_MAX` (glibc read it already).
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn arena_limit(from_environment: Option<std::ffi::OsString>) -> Option<i32> {
    from_environment.is_none().then_some(ARENAS)
}

/// Caps glibc's arenas at [`ARENAS`]. Called before the runtime starts its threads: a thread
/// takes an arena the first time it allocates.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_arenas() {
    if let Some(arenas) = arena_limit(std::env::var_os("MALLOC_ARENA_MAX")) {
        // SAFETY: mallopt only changes a limit the allocator reads when a thread needs an arena;
        // it is thread-safe in glibc and touches no memory in use.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_arenas() {}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only returns free memory at the top of the heaps and in whole free pages
    // to the kernel; it touches no memory still in use and is thread-safe in glibc.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operators_malloc_arena_max_wins() {
        assert_eq!(arena_limit(None), Some(ARENAS));
        assert_eq!(arena_limit(Some("8".into())), None);
    }
}
