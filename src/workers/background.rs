//! Where the work behind the acknowledgement runs: a runtime of its own, whose threads the
//! operating system schedules after the server's. A webhook is answered once its messages are
//! durable in the inbox; admission, dispatch, sending and the rest can wait, and under a burst
//! they should: sharing the cores evenly with them, answering fell to a fifth of what the server
//! alone answers (docs/BENCHMARKS.md). On Linux each of these threads runs with a higher nice
//! value (`ingest.background_nice`), so that they take whatever the server leaves and no more;
//! threads they start (SQLite's connections) inherit it. Kept to cores of its own
//! (`ingest.background_cpus`), a command's relay of threads — these, SQLite's connection threads
//! — hands over on one core rather than waking a thread on another (docs/BENCHMARKS.md).
//! Elsewhere than Linux the runtime is only apart.

use tokio::runtime::{Handle, Runtime};

use crate::config::CoreList;

pub struct Background {
    runtime: Option<Runtime>,
}

impl Background {
    /// A runtime whose threads run `nice` steps below the thread that starts it, on `cores`
    /// (`ingest.background_cpus`): one worker thread per core named, or per core the machine has
    /// when none are.
    pub fn start(nice: i32, cores: CoreList) -> std::io::Result<Self> {
        super::cores::may_use(&cores)?;
        let threads = match cores.cores().len() {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            named => named,
        };
        // From the starting thread's priority, not from that of the thread that starts each one
        // (its blocking threads are started by its own, already lowered).
        let lowered = own_priority().saturating_add(nice).min(19);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("chatgate-behind")
            .enable_all()
            .on_thread_start(move || {
                set_priority(lowered);
                if let Err(error) = super::cores::keep_this_thread_to(&cores) {
                    tracing::warn!(cores = %cores, %error, "cannot keep the background to its cores");
                }
            })
            .build()?;
        Ok(Self { runtime: Some(runtime) })
    }

    pub fn handle(&self) -> Handle {
        match &self.runtime {
            Some(runtime) => runtime.handle().clone(),
            None => Handle::current(),
        }
    }
}

impl Drop for Background {
    /// Its tasks have stopped by now (the workers are waited for); what is left is dropped without
    /// blocking the server's own runtime.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The calling thread's nice value.
#[cfg(target_os = "linux")]
fn own_priority() -> i32 {
    // On Linux a thread has a nice value of its own: `who = 0` is the calling thread.
    // SAFETY: getpriority only reads this thread's scheduling priority.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

#[cfg(target_os = "linux")]
fn set_priority(nice: i32) {
    // SAFETY: setpriority only changes this thread's scheduling priority.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        tracing::warn!(nice, error = %std::io::Error::last_os_error(), "cannot lower the background's priority");
    }
}

#[cfg(not(target_os = "linux"))]
fn own_priority() -> i32 {
    0
}

#[cfg(not(target_os = "linux"))]
fn set_priority(_nice: i32) {}

#[cfg(test)]
mod tests {
    use super::{Background, CoreList};

    #[cfg(target_os = "linux")]
    #[test]
    fn its_threads_run_at_the_lower_priority() {
        let background = Background::start(7, CoreList::default()).expect("a runtime");
        let (worker, blocking) = background.handle().block_on(async {
            let worker = tokio::spawn(async { super::own_priority() }).await.expect("a task");
            let blocking = tokio::task::spawn_blocking(super::own_priority).await.expect("a blocking task");
            (worker, blocking)
        });
        // Lowered from the test thread's own (0 unless the suite itself runs niced), once.
        let lowered = (super::own_priority() + 7).min(19);
        assert_eq!((worker, blocking), (lowered, lowered));
    }
}
