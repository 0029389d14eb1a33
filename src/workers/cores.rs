//! Keeps every thread of the gateway on the cores `server.cpus` names, as `taskset -c` would, and
//! the runtime behind the inbox on those `ingest.background_cpus` names ([`super::Background`]).
//!
//! Why it is a setting: a command is a relay of threads — the server's, the runtime behind the
//! inbox, one thread per SQLite connection, each statement a trip there and back — and when they
//! may run on any core, each hand-over may wake a thread on another one. On this project's 2-core
//! machine, SQLite, the same build kept to one core spent a quarter less CPU per command in a
//! flood and at a quarter of the rate, replied sooner at light load and drained a flood faster;
//! but at 80% of that (higher) rate one core fell behind, and on PostgreSQL it saved a tenth of
//! the gateway's CPU for a lower rate. A choice for the machine, not a default
//! (docs/BENCHMARKS.md, 2026-12-02 third; docs/OPERATING.md, "Cores").

use crate::config::CoreList;

/// Moves every thread of this process onto `cores` (nothing when the list is empty); threads
/// started later inherit it from the thread that starts them. Called at the start of `serve`,
/// before the runtime behind the inbox and the database's connections start their threads.
#[cfg(target_os = "linux")]
pub fn keep_threads_to(cores: &CoreList) -> std::io::Result<()> {
    if cores.is_empty() {
        return Ok(());
    }
    let set = cpu_set(cores);
    let mut moved = std::collections::BTreeSet::new();
    // A thread started during a pass by one not yet moved is found by the next.
    loop {
        let new: Vec<libc::pid_t> = threads()?.into_iter().filter(|thread| moved.insert(*thread)).collect();
        if new.is_empty() {
            return Ok(());
        }
        for thread in new {
            if let Err(error) = keep_thread_to(thread, &set) {
                // A thread that ended since the list was read has nothing left to move.
                if error.raw_os_error() != Some(libc::ESRCH) {
                    return Err(error);
                }
            }
        }
    }
}

/// Whether the calling thread may run on every core of `cores` already: a list of the
/// gateway's own cores narrows where a thread runs, it never widens it.
#[cfg(target_os = "linux")]
pub fn may_use(cores: &CoreList) -> std::io::Result<()> {
    // SAFETY: an all-zero `cpu_set_t` is the empty set; the kernel writes at most its size.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `CPU_ISSET` reads one bit of a valid set, for a core below `CPU_SETSIZE` (the list
    // holds none above 1,023).
    match cores.cores().iter().find(|&&core| !unsafe { libc::CPU_ISSET(core, &allowed) }) {
        Some(core) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("core {core} is not among those the gateway runs on"),
        )),
        None => Ok(()),
    }
}

/// Keeps the calling thread to `cores` (nothing when the list is empty); the threads it starts
/// inherit them.
#[cfg(target_os = "linux")]
pub fn keep_this_thread_to(cores: &CoreList) -> std::io::Result<()> {
    if cores.is_empty() {
        return Ok(());
    }
    keep_thread_to(0, &cpu_set(cores))
}

/// The kernel's form of a list of cores.
#[cfg(target_os = "linux")]
fn cpu_set(cores: &CoreList) -> libc::cpu_set_t {
    // SAFETY: an all-zero `cpu_set_t` is the empty set, and `CPU_SET` only sets a bit of it for a
    // core below `CPU_SETSIZE` (the list holds none above 1,023).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &core in cores.cores() {
        unsafe { libc::CPU_SET(core, &mut set) };
    }
    set
}

/// Keeps one thread (0: the calling one) to the cores of `set`.
#[cfg(target_os = "linux")]
fn keep_thread_to(thread: libc::pid_t, set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: the set is a valid `cpu_set_t` of the size given; the call reads it only.
    if unsafe { libc::sched_setaffinity(thread, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The ids of this process's threads.
#[cfg(target_os = "linux")]
fn threads() -> std::io::Result<Vec<libc::pid_t>> {
    let mut threads = vec![];
    for entry in std::fs::read_dir("/proc/self/task")? {
        if let Some(thread) = entry?.file_name().to_str().and_then(|name| name.parse().ok()) {
            threads.push(thread);
        }
    }
    Ok(threads)
}

#[cfg(not(target_os = "linux"))]
pub fn keep_threads_to(cores: &CoreList) -> std::io::Result<()> {
    may_use(cores)
}

#[cfg(not(target_os = "linux"))]
pub fn may_use(cores: &CoreList) -> std::io::Result<()> {
    if cores.is_empty() {
        return Ok(());
    }
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "keeping threads to cores is Linux's only"))
}

#[cfg(not(target_os = "linux"))]
pub fn keep_this_thread_to(_cores: &CoreList) -> std::io::Result<()> {
    Ok(())
}
