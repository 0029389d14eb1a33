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
}

const fn counter(name: &'static str, help: &'static str) -> Family {
    Family { name, kind: Kind::Counter, help }
}

const fn gauge(name: &'static str, help: &'static str) -> Family {
    Family { name, kind: Kind::Gauge, help }
}

/// Every family, as `docs/REFERENCE.md` lists them.
pub const FAMILIES: &[Family] = &[
    counter("chatgate_webhooks_total", "Provider and caller webhooks, by channel and how each ended."),
    counter("chatgate_inbound_messages_total", "Inbound messages, by channel and what became of each."),
    counter("chatgate_text_readings_total", "Messages from known people, by how their text was read."),
    counter("chatgate_delivery_statuses_total", "Providers' delivery statuses of sent messages, by status."),
    counter("chatgate_admission_batches_total", "Group commits of admissions."),
    counter("chatgate_admissions_batched_total", "Admissions committed in group commits."),
    counter("chatgate_admissions_shed_total", "Admissions refused because the admission queue was full."),
    counter("chatgate_step_batches_total", "Group commits of the workers' steps."),
    counter("chatgate_steps_batched_total", "Workers' steps committed in group commits."),
    counter("chatgate_outbound_messages_total", "Messages to people, by channel and outcome."),
    counter("chatgate_confirmation_answers_total", "Answers to confirmation prompts, by outcome."),
    counter("chatgate_confirmations_expired_total", "Confirmations that expired unanswered."),
    counter("chatgate_delivery_timeouts_total", "Deliveries ended by a timeout, by class."),
    counter("chatgate_transitions_total", "Committed command transitions, by the state entered."),
    counter("chatgate_dispatch_attempts_total", "Attempts to hand a command to an executor, by outcome."),
    counter("chatgate_event_streams_refused_total", "Event streams refused, by the limit reached."),
    counter("chatgate_unknown_sender_refusals_unsent_total", "Refusals to strangers not sent, over budget."),
    counter("chatgate_connections_refused_total", "Connections refused at the connection limit."),
    counter("chatgate_bus_unreadable_total", "Bus messages that could not be read."),
    Family {
        name: "chatgate_ack_latency_seconds",
        kind: Kind::Histogram,
        help: "Seconds from a command's receipt to its executor's acknowledgement.",
    },
    Family {
        name: "chatgate_result_latency_seconds",
        kind: Kind::Histogram,
        help: "Seconds from a command's receipt to its result.",
    },
    gauge("chatgate_event_streams", "Event streams open on this instance."),
    gauge("chatgate_store_up", "1 when the database answered the last scrape's figures, else 0."),
    gauge("chatgate_outbox_pending", "Outbox rows waiting, by kind."),
    gauge("chatgate_outbox_oldest_age_seconds", "Age of the oldest waiting outbox row, by kind."),
    gauge("chatgate_agents", "Configured agents, by state (as /v1/agents lists them)."),
    gauge("chatgate_deliveries", "Deliveries in flight, and closed within the last hour, by state."),
    gauge("chatgate_completeness_ack_ratio", "Of the last hour's deliveries, the share acknowledged."),
    gauge("chatgate_completeness_result_ratio", "Of the last hour's deliveries, the share that ended with a result."),
    gauge("chatgate_completeness_error_ratio", "Of the last hour's deliveries, the share that ended with an error."),
    gauge("chatgate_orphaned_commands", "Started commands no executor acknowledged for 5 minutes."),
];

/// The families without labels: one series each.
const UNLABELLED: &[&str] = &[
    "chatgate_admission_batches_total",
    "chatgate_admissions_batched_total",
    "chatgate_admissions_shed_total",
    "chatgate_step_batches_total",
    "chatgate_steps_batched_total",
    "chatgate_confirmations_expired_total",
    "chatgate_connections_refused_total",
    "chatgate_bus_unreadable_total",
    "chatgate_event_streams",
    "chatgate_completeness_ack_ratio",
    "chatgate_completeness_result_ratio",
    "chatgate_completeness_error_ratio",
    "chatgate_orphaned_commands",
];

const CHANNELS: &[&str] = &["whatsapp", "twilio", "standard", "hooks"];
const WEBHOOK_OUTCOMES: &[&str] = &["accepted", "bad_signature", "malformed", "unknown_app", "unavailable"];
const INBOUND_OUTCOMES: &[&str] = &[
    "command",
    "duplicate",
    "redelivered",
    "unroutable",
    "unknown_sender",
    "awaiting_identity",
    "help",
    "no_match",
    "ambiguous",
    "invalid_value",
    "two_readings",
    "suggested",
    "negated",
    "several",
    "not_a_command",
    "reaction",
    "notice",
    "unreadable",
    "answer",
    "conflict",
    "rate_limited",
];
const READINGS: &[&str] = &[
    "exact",
    "normalized",
    "fuzzy",
    "reply_id",
    "accepted",
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

/// Describes every family and registers the series known now at zero. Idempotent: a series that
/// already counts keeps its count (counters and gauges are only moved by 0).
pub fn announce<'a>(executors: impl Iterator<Item = &'a String>, tenants: impl Iterator<Item = &'a String>) {
    for family in FAMILIES {
        match family.kind {
            Kind::Counter => metrics::describe_counter!(family.name, family.help),
            Kind::Gauge => metrics::describe_gauge!(family.name, family.help),
            Kind::Histogram => metrics::describe_histogram!(family.name, family.help),
        }
        match family.kind {
            Kind::Counter if UNLABELLED.contains(&family.name) => metrics::counter!(family.name).increment(0),
            Kind::Gauge if UNLABELLED.contains(&family.name) => metrics::gauge!(family.name).increment(0.0),
            _ => {}
        }
    }
    let zero = |name: &'static str, labels: &[(&'static str, String)]| metrics::counter!(name, labels).increment(0);
    for channel in CHANNELS {
        for outcome in WEBHOOK_OUTCOMES {
            zero("chatgate_webhooks_total", &[("channel", channel.to_string()), ("outcome", outcome.to_string())]);
        }
        for outcome in INBOUND_OUTCOMES {
            let labels = [("channel", channel.to_string()), ("outcome", outcome.to_string())];
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
    for (name, label, values) in [
        ("chatgate_text_readings_total", "reading", READINGS),
        ("chatgate_confirmation_answers_total", "outcome", ANSWERS),
        ("chatgate_delivery_timeouts_total", "class", &["delivery_timeout", "execution_timeout"][..]),
        ("chatgate_event_streams_refused_total", "limit", &["instance", "client"][..]),
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
    }
}
