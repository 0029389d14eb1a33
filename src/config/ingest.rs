//! `[ingest]`: the inbox every verified webhook message goes into before its answer, and the
//! admission behind it (docs/ARCHITECTURE.md, "The path of one webhook").

use serde::{Deserialize, Serialize};

/// What a provider's `200` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Acknowledge {
    /// The delivery's messages are durable in the inbox: admission runs behind the answer.
    Durable,
    /// The delivery's messages are admitted too (at most `admission_wait_ms`; past it the answer
    /// goes out as `durable` would): the answer then says what each came to.
    Admitted,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    pub acknowledge: Acknowledge,
    /// How long an answer that waits for admission (`admitted`; Twilio's TwiML) may wait.
    pub admission_wait_ms: u64,
    /// Messages stored and not yet admitted past which a webhook is answered 503 with
    /// `Retry-After` (providers retry) and nothing of it is stored.
    pub max_backlog: u64,
    /// The `Retry-After` of that answer.
    pub retry_after_secs: u64,
    /// The longest a webhook waits for its messages to be stored, whatever the database does:
    /// past it the answer is 503 with `Retry-After` and the provider retries (a delivery stored
    /// after all is recognized when it comes again). While the database is known to be out of
    /// reach, the answer is 503 at once.
    pub store_timeout_ms: u64,
    /// The most messages one admission pass claims.
    pub admission_batch: i64,
    /// How long admission may wait for a flood of webhooks to ebb before admitting it, from the
    /// flood's start (`service::intake::inbox::burst`): the cores answer the flood first. 0:
    /// admitted as it comes.
    pub admission_defer_ms: u64,
    /// How long an instance holds the messages it stored before another instance on the same
    /// PostgreSQL may admit them: it renews the hold every second, so only a dead instance's
    /// messages are taken over, this long after it died. (A SQLite database has one process:
    /// a restarted gateway takes what the last one left at once.)
    pub lease_secs: u64,
    /// How many steps (Linux nice values, 0–19) below the server the work behind the
    /// acknowledgement runs — admission, dispatch, sending: under a burst, answering webhooks
    /// comes first and the rest takes the cores it leaves. 0: the same priority.
    pub background_nice: i32,
    /// The cores that work runs on (`"1"`), one of its threads per core, and the threads they
    /// start (SQLite's connections) with them; the server's threads keep every core. Empty: the
    /// cores the gateway runs on, a thread per core (docs/OPERATING.md, "Cores").
    pub background_cpus: super::CoreList,
    /// How long a command being written in turns ("refund", then "1234", ...) waits for the
    /// person's next message before it ends quietly.
    pub conversation_idle_secs: u64,
    /// Answers in a row that are not the value asked for before a command written in turns ends.
    pub conversation_tries: u32,
    /// How long a question of a command written in turns is held for the person's next message:
    /// "refund" "1234" "25.00" sent within it asks nothing and gives one prompt. 0: asked at once.
    pub conversation_burst_ms: u64,
    /// How long a person's one-time code for linking another channel lives ("link CODE").
    pub link_code_secs: u64,
    /// How many link codes a person may have pending; a new one past it retires the oldest.
    pub link_codes_pending: u32,
    /// How long a link can be undone from the person's other channels ("not you? reply STOP").
    pub link_undo_secs: u64,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            acknowledge: Acknowledge::Durable,
            admission_wait_ms: 2_000,
            max_backlog: 100_000,
            retry_after_secs: 5,
            store_timeout_ms: 800,
            admission_batch: 512,
            admission_defer_ms: 1_000,
            lease_secs: 10,
            background_nice: 10,
            background_cpus: super::CoreList::default(),
            conversation_idle_secs: 600,
            conversation_tries: 3,
            conversation_burst_ms: 2_000,
            link_code_secs: 3_600,
            link_codes_pending: 3,
            link_undo_secs: 7 * 86_400,
        }
    }
}
