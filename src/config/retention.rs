//! `[retention]`: how long what chatgate stores is kept (docs/OPERATING.md, "Retention").

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Message texts are kept 90 days unless configured (as Svix keeps payloads on its cloud).
const DEFAULT_TEXTS: Duration = Duration::from_secs(90 * 86_400);
/// Commands, deliveries and evidence are kept a year and a month unless configured: a year's
/// audit looked back on, with a month to export it.
const DEFAULT_RECORDS: Duration = Duration::from_secs(396 * 86_400);

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// How long the texts of the messages people send and of the replies, prompts and notices
    /// sent to them are kept, as a duration ("90d", "2w 3d"). Past it a purge overwrites them;
    /// what a command still waits for is never touched. At least the longest dedupe window,
    /// confirmation TTL and command TTL the registry declares (checked at start and reload).
    #[serde(serialize_with = "as_text", deserialize_with = "from_text")]
    pub texts: Duration,
    /// How long commands that ended are kept, with their deliveries, transitions, approvals,
    /// messages and replies, and the evidence chain before them (cut at a checkpoint), and how
    /// long the outbox's sent rows and the API's idempotency records are kept. Past it a purge
    /// deletes them; a command under way, or within its dedupe window, is never touched. At least
    /// `texts`, and the windows `texts` must outlast.
    #[serde(serialize_with = "as_text", deserialize_with = "from_text")]
    pub records: Duration,
    /// The most rows one purge transaction overwrites or deletes (a tenth as many commands, each
    /// with its rows): small, so that a purge never holds the database's writers for long.
    pub batch: u32,
    /// How long one purge transaction may hold the database's writers, in milliseconds: each
    /// takes as few rows as it must (at least one command's) to end within it, since a reply's
    /// commit that comes meanwhile waits for it on SQLite.
    pub transaction_ms: u64,
    /// The most of the time a purge's transactions may take (above 0, at most 1): after each it
    /// waits until they took no more than this, so that the pipeline's commits pass between them
    /// (0.25: a transaction that took 20 ms is followed by a 60 ms pause). A transaction that
    /// waited for the writers counts what it waited, so a busy pipeline slows the purge down.
    pub share: f64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self { texts: DEFAULT_TEXTS, records: DEFAULT_RECORDS, batch: 500, transaction_ms: 5, share: 0.25 }
    }
}

fn as_text<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&in_days(*duration))
}

/// A duration as an operator wrote it: whole days in days (humantime would say `90d` is
/// "2months 29days 2h 52m 48s"), anything else as humantime says it.
pub fn in_days(duration: Duration) -> String {
    match duration.as_secs() {
        86_400 => "1day".into(),
        secs if secs % 86_400 == 0 && duration.subsec_nanos() == 0 => format!("{}days", secs / 86_400),
        _ => humantime::format_duration(duration).to_string(),
    }
}

fn from_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text).map_err(|e| serde::de::Error::custom(format!("`{text}` is not a duration: {e}")))
}
