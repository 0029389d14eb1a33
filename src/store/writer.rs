//! The admission writer: one task that takes every admission waiting and commits them together
//! (group commit). A lone admission goes through at once; under load, each transaction carries
//! as many as have queued meanwhile.

use tokio::sync::{mpsc, oneshot};

use crate::store::{AdmissionWrite, Admitted, Store, StoreError};

/// The most admissions one transaction carries.
const MAX_BATCH: usize = 128;

pub(crate) struct Job {
    write: AdmissionWrite,
    reply: oneshot::Sender<Result<Admitted, StoreError>>,
}

/// Starts the writer for `store` (which must have none itself) and returns its queue, which holds
/// at most `waiting` admissions: one more is refused at once (503) instead of waiting in memory.
pub(crate) fn spawn(store: Store, waiting: usize, on: &tokio::runtime::Handle) -> mpsc::Sender<Job> {
    let (queue, jobs) = mpsc::channel(waiting.max(1));
    on.spawn(run(store, jobs));
    queue
}

async fn run(store: Store, mut jobs: mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while jobs.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (writes, replies): (Vec<_>, Vec<_>) = batch.drain(..).map(|job| (job.write, job.reply)).unzip();
        let results = store.commands().admit_many(&writes).await;
        store.observe_admissions(&results);
        for (reply, result) in replies.into_iter().zip(results) {
            // The caller may have gone (a timed-out request); the admission stands either way.
            let _ = reply.send(result);
        }
    }
}

/// Why the writer did not answer.
#[derive(Debug)]
pub(crate) enum WriterGone {
    /// Its queue is full: the database is slow or down and enough requests already wait.
    Full,
    /// Before it took the write, which comes back.
    Before(Box<AdmissionWrite>),
    /// After it took the write: it may or may not have been committed.
    During,
}

/// Hands `write` to the writer and waits for its answer; a full queue refuses it at once.
pub(crate) async fn submit(
    queue: &mpsc::Sender<Job>,
    write: AdmissionWrite,
) -> Result<Result<Admitted, StoreError>, WriterGone> {
    let (reply, answer) = oneshot::channel();
    queue.try_send(Job { write, reply }).map_err(|unsent| match unsent {
        mpsc::error::TrySendError::Full(_) => WriterGone::Full,
        mpsc::error::TrySendError::Closed(job) => WriterGone::Before(Box::new(job.write)),
    })?;
    answer.await.map_err(|_| WriterGone::During)
}
