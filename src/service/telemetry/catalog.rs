//! Every metric family chatgate exports, with its help text (Prometheus's `# HELP`), described when
//! the gateway starts; and every series whose labels are known then (the channels, the outcomes,
//! the configured executors and tenants) registered at zero, so that an alert on one fires from
//! the first scrape — a counter that appears only at its first event is absent to a PromQL rule,
//! not 0. Ratios end in `_ratio`, as Prometheus's naming conventions ask.

use crate::domain::lifecycle::State;

/// A family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One family: its name, type and help text.
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// Whether its series have labels; one without has a single series, registered at 0.
    pub labelled: bool,
}

const fn counter(name: &'static str, help: &'static str) -> Family {
    Family { name, kind: Kind::Counter, help, labelled: true }
}

const fn gauge(name: &'static str, help: &'static str) -> Family {
    Family { name, kind: Kind::Gauge, help, labelled: true }
}

/// A histogram: one series (its buckets, sum and count), without labels.
const fn histogram(name: &'static str, help: &'static str) -> Family {
    Family { name, kind: Kind::Histogram, help, labelled: false }
}

/// A family of one series, without labels.
const fn alone(family: Family) -> Family {
    Family { labelled: false, ..family }
}

/// Every family, as `docs/REFERENCE.md` lists them.
pub const FAMILIES: &[Family] = &[
    counter("chatgate_webhooks_total", "Provider and caller webhooks, by channel and how each ended."),
    counter("chatgate_inbound_messages_total", "Inbound messages, by channel and what became of each."),
    counter("chatgate_text_readings_total", "Messages from known people, by how their text was read."),
    counter("chatgate_delivery_statuses_total", "Providers' delivery statuses of sent messages, by status."),
    alone(counter("chatgate_admission_batches_total", "Group commits of admissions.")),
    alone(counter("chatgate_admissions_batched_total", "Admissions committed in group commits.")),
    alone(counter("chatgate_admissions_shed_total", "Admissions refused because the admission queue was full.")),
    alone(counter("chatgate_step_batches_total", "Group commits of the workers' steps.")),
    alone(counter("chatgate_steps_batched_total", "Workers' steps committed in group commits.")),
    counter("chatgate_outbound_messages_total", "Messages to people, by channel and outcome."),
    counter("chatgate_confirmation_answers_total", "Answers to confirmation prompts, by outcome."),
    alone(counter("chatgate_confirmations_expired_total", "Confirmations that expired unanswered.")),
    counter("chatgate_delivery_timeouts_total", "Deliveries ended by a timeout, by class."),
    counter("chatgate_transitions_total", "Committed command transitions, by the state entered."),
    counter("chatgate_dispatch_attempts_total", "Attempts to hand a command to an executor, by outcome."),
    counter("chatgate_event_streams_refused_total", "Event streams refused, by the limit reached."),
    counter("chatgate_unknown_sender_refusals_unsent_total", "Refusals to strangers not sent, over budget."),
    counter("chatgate_link_attempts_refused_total", "Link codes offered past the attempts allowed, by tenant."),
    alone(counter("chatgate_connections_refused_total", "Connections refused at the connection limit.")),
    alone(counter("chatgate_bus_unreadable_total", "Agent messages from RabbitMQ or NATS that could not be read.")),
    histogram("chatgate_ack_latency_seconds", "Seconds from a command's receipt to its executor's acknowledgement."),
    histogram("chatgate_result_latency_seconds", "Seconds from a command's receipt to its result."),
    alone(gauge("chatgate_event_streams", "Event streams open on this instance.")),
    gauge("chatgate_store_up", "1 when the database answered the last scrape's figures, else 0."),
    gauge("chatgate_outbox_pending", "Outbox rows waiting, by kind."),
    gauge("chatgate_outbox_oldest_age_seconds", "Age of the oldest waiting outbox row, by kind."),
    gauge("chatgate_agents", "Configured agents, by state (as /v1/agents lists them)."),
    gauge("chatgate_deliveries", "Deliveries in flight, and closed within the last hour, by state."),
    alone(gauge("chatgate_completeness_ack_ratio", "Of the last hour's deliveries, the share acknowledged.")),
    alone(gauge(
        "chatgate_completeness_result_ratio",
        "Of the last hour's deliveries, the share that ended with a result.",
    )),
    alone(gauge(
        "chatgate_completeness_error_ratio",
        "Of the last hour's deliveries, the share that ended with an error.",
    )),
    alone(gauge("chatgate_orphaned_commands", "Started commands no executor acknowledged for 5 minutes.")),
    alone(gauge("chatgate_approvals_pending", "Approvals waiting for people's decisions.")),
    histogram("chatgate_approval_decision_seconds", "Seconds from an approval's request to its settling."),
    alone(counter("chatgate_approval_overrides_total", "Pending approvals overridden by break-glass.")),
    alone(counter("chatgate_lock_refusals_total", "Mutations refused because another command held what they change.")),
    alone(counter("chatgate_lock_releases_total", "Locks released by operators before their commands ended.")),
    counter("chatgate_previews_total", "Previews asked of executors, by what became of the command."),
    alone(gauge("chatgate_inbox_backlog", "Messages stored in the inbox and not yet admitted.")),
    alone(gauge("chatgate_inbox_oldest_pending_seconds", "Age of the oldest message the inbox holds unadmitted.")),
    alone(gauge("chatgate_inbox_parked", "Messages parked in the inbox for a tenant's identity resolver.")),
    histogram("chatgate_inbox_admission_lag_seconds", "Seconds from a message's storage to its admission."),
    histogram(
        "chatgate_inbox_commit_seconds",
        "Seconds one inbox transaction (the deliveries waiting) took to commit.",
    ),
    histogram("chatgate_inbox_commit_deliveries", "Deliveries one inbox transaction carried."),
    histogram(
        "chatgate_admission_deferred_seconds",
        "Seconds admission gave way to a burst of webhooks before admitting it (ingest.admission_defer_ms).",
    ),
    alone(counter("chatgate_inbox_refused_total", "Webhooks answered 503 because the inbox's backlog was full.")),
    counter("chatgate_inbox_unadmitted_total", "Stored messages that could not be admitted, by reason."),
    counter("chatgate_retention_texts_purged_total", "Texts overwritten past retention.texts, by what they were."),
    counter("chatgate_retention_records_deleted_total", "Records deleted past retention.records, by what they were."),
    histogram(
        "chatgate_retention_transaction_seconds",
        "Seconds one purge transaction held the writers (retention.transaction_ms is its aim).",
    ),
];

const WEBHOOK_OUTCOMES: &[&str] = &["accepted", "bad_signature", "malformed", "unknown_app", "unavailable"];
const READINGS: &[&str] = &[
    "exact",
    "normalized",
    "fuzzy",
    "reply_id",
    "accepted",
    "collected",
    "corrected",
    "courtesy",
    "suggested",
    "asked_back",
    "refused",
    "negated",
    "several",
    "ambiguous",
    "help",
    "no_match",
];
const ANSWERS: &[&str] = &["accepted", "declined", "too_late", "wrong_actor", "already_answered", "unmatched"];
const SENDS: &[&str] = &["sent", "retry", "given_up"];
const DISPATCHES: &[&str] = &["executed", "failed", "delivered", "handed", "retry", "refused"];

/// Describes every family and registers the series known now at zero: each of `channels` (their
/// list is the channels layer's), executor and tenant. Idempotent: a series that already counts
/// keeps its count (counters and gauges are only moved by 0).
pub fn announce<'a>(
    channels: impl Iterator<Item = &'static str>,
    executors: impl Iterator<Item = &'a String>,
    tenants: impl Iterator<Item = &'a String>,
) {
    for family in FAMILIES {
        match family.kind {
            Kind::Counter => metrics::describe_counter!(family.name, family.help),
            Kind::Gauge => metrics::describe_gauge!(family.name, family.help),
            Kind::Histogram => metrics::describe_histogram!(family.name, family.help),
        }
        // A histogram is registered empty: its buckets, sum and count read 0 until its first
        // observation (an alert on a latency exists before the first command).
        match family.kind {
            Kind::Counter if !family.labelled => metrics::counter!(family.name).increment(0),
            Kind::Gauge if !family.labelled => metrics::gauge!(family.name).increment(0.0),
            Kind::Histogram => drop(metrics::histogram!(family.name)),
            _ => {}
        }
    }
    announce_channels(channels);
    let zero = |name: &'static str, labels: &[(&'static str, String)]| metrics::counter!(name, labels).increment(0);
    for (name, label, values) in [
        ("chatgate_text_readings_total", "reading", READINGS),
        ("chatgate_confirmation_answers_total", "outcome", ANSWERS),
        ("chatgate_delivery_timeouts_total", "class", &["delivery_timeout", "execution_timeout"][..]),
        ("chatgate_event_streams_refused_total", "limit", &["instance", "client"][..]),
        ("chatgate_inbox_unadmitted_total", "reason", &["unreadable", "refused"][..]),
        ("chatgate_previews_total", "outcome", &["shown", "missing", "stopped", "settled"][..]),
        ("chatgate_retention_texts_purged_total", "text", &["message", "reply", "prompt"][..]),
        (
            "chatgate_retention_records_deleted_total",
            "record",
            &["command", "delivery", "message", "reply", "idempotency_key", "evidence"][..],
        ),
    ] {
        for value in values {
            zero(name, &[(label, value.to_string())]);
        }
    }
    for state in State::ALL {
        zero("chatgate_transitions_total", &[("to", state.as_str().to_owned())]);
    }
    for executor in executors {
        for outcome in DISPATCHES {
            let labels = [("executor", executor.clone()), ("outcome", outcome.to_string())];
            zero("chatgate_dispatch_attempts_total", &labels);
        }
    }
    for tenant in tenants {
        zero("chatgate_unknown_sender_refusals_unsent_total", &[("tenant", tenant.clone())]);
        zero("chatgate_link_attempts_refused_total", &[("tenant", tenant.clone())]);
    }
}

/// The series of every channel's webhooks, messages, statuses and replies, at zero.
fn announce_channels(channels: impl Iterator<Item = &'static str>) {
    let zero = |name: &'static str, labels: &[(&'static str, String)]| metrics::counter!(name, labels).increment(0);
    for channel in channels {
        for outcome in WEBHOOK_OUTCOMES {
            zero("chatgate_webhooks_total", &[("channel", channel.to_string()), ("outcome", outcome.to_string())]);
        }
        for outcome in crate::domain::message::MessageOutcome::counted() {
            let labels = [("channel", channel.to_string()), ("outcome", outcome.as_str().to_owned())];
            zero("chatgate_inbound_messages_total", &labels);
        }
        for (status, matched) in
            ["sent", "delivered", "read", "failed"].iter().flat_map(|s| [(s, "true"), (s, "false")])
        {
            let labels =
                [("channel", channel.to_string()), ("status", status.to_string()), ("matched", matched.into())];
            zero("chatgate_delivery_statuses_total", &labels);
        }
        for outcome in SENDS {
            zero(
                "chatgate_outbound_messages_total",
                &[("channel", channel.to_string()), ("outcome", outcome.to_string())],
            );
        }
    }
}
