//! Takes from the budgets every instance shares (PostgreSQL), batched: each take waits for the
//! batch it joined, and a batch is one short transaction however many takes it holds
//! ([`crate::store::RateLimits::take_chains`]), so that a burst of messages costs a few statements
//! instead of a statement and a row lock each — the tenant's row, which every message of the
//! tenant would otherwise queue on. A batch is whatever waited while the last one ran.

use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot};

use crate::store::{Chain, Store, StoreError};

/// The most takes one transaction carries.
const BATCH: usize = 512;

/// One chain of takes, and who waits for its answer.
struct Ask {
    chain: Chain,
    now: OffsetDateTime,
    answer: oneshot::Sender<Result<Result<(), i64>, String>>,
}

/// The batching writer's door.
#[derive(Debug, Clone)]
pub struct SharedTakes {
    asks: mpsc::Sender<Ask>,
}

impl SharedTakes {
    /// Starts the writer (on the current tokio runtime); it stops when the last door is dropped.
    pub fn start(store: Store) -> Self {
        let (asks, waiting) = mpsc::channel(BATCH * 8);
        tokio::spawn(write(store, waiting));
        Self { asks }
    }

    /// Takes `chain` in order, stopping at its first refusal; `Err` inside holds the milliseconds
    /// until the refused take would be allowed.
    pub async fn take(&self, chain: Chain, now: OffsetDateTime) -> Result<Result<(), i64>, StoreError> {
        let (answer, answered) = oneshot::channel();
        let stopped = || StoreError::Unavailable("the shared rate limits' writer stopped".into());
        self.asks.send(Ask { chain, now, answer }).await.map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?.map_err(StoreError::Unavailable)
    }
}

async fn write(store: Store, mut waiting: mpsc::Receiver<Ask>) {
    let mut batch = Vec::with_capacity(BATCH);
    while waiting.recv_many(&mut batch, BATCH).await > 0 {
        let now = batch.iter().map(|ask| ask.now).max().unwrap_or_else(OffsetDateTime::now_utc);
        let chains: Vec<Chain> = batch.iter().map(|ask| ask.chain.clone()).collect();
        match store.rate_limits().take_chains(&chains, now).await {
            Ok(taken) => {
                for (ask, taken) in batch.drain(..).zip(taken) {
                    let _ = ask.answer.send(Ok(taken));
                }
            }
            Err(error) => {
                let error = error.to_string();
                for ask in batch.drain(..) {
                    let _ = ask.answer.send(Err(error.clone()));
                }
            }
        }
    }
}
