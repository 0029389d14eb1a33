//! Previews (issue #47): before a person is asked to confirm a mutation, its executor may say what
//! the command would do ("Order 1234 — paid 80.00, already refunded 0.00; refunding 25.00 leaves
//! 55.00") or that it cannot be done. The prompt shows the preview, the confirmation is bound to
//! its digest, and the execution carries it, so that an executor can refuse a command confirmed on
//! a world that changed since (`stale_preview`). Pure: what an answer may hold and how it is read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::domain::names::named_enum;

named_enum! {
    /// Whether a command asks its executor for a preview before the confirmation (the registry's
    /// `preview`), and what a preview that fails or times out leads to: `optional`, the prompt
    /// goes out without one and says so; `required`, the command is refused (nobody confirms
    /// blind what the team wants previewed).
    PreviewRule {
        Off => "none",
        Optional => "optional",
        Required => "required",
    }
}

/// The largest preview answer read, in bytes: a preview is a few lines for a chat message.
pub const MAX_ANSWER_BYTES: usize = 8 * 1024;
/// Characters of a preview's summary (a WhatsApp message holds 4,096 in all).
pub const MAX_SUMMARY_CHARS: usize = 600;
/// Fields a preview may name, and characters of each name and value.
pub const MAX_FIELDS: usize = 20;
pub const MAX_FIELD_CHARS: usize = 200;
/// The error code with which an executor refuses an execution confirmed on an old preview.
pub const STALE_PREVIEW: &str = "stale_preview";

/// What a command would do, as its executor previewed it: one line the prompt shows, and named
/// values a template may show apart (`total`, `refunded`, `left`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Preview {
    pub summary: String,
    #[serde(default)]
    pub fields: BTreeMap<String, String>,
}

impl Preview {
    /// The preview's digest: SHA-256 of its RFC 8785 canonical JSON, hex. The confirmation and
    /// the execution name it, so an executor can tell which preview a person confirmed.
    pub fn digest(&self) -> String {
        // A struct of strings always serializes.
        let canonical = serde_jcs::to_vec(self).unwrap_or_default();
        hex::encode(Sha256::digest(canonical))
    }

    fn check(&self) -> Result<(), PreviewFault> {
        let too_long = |text: &str, max: usize| text.chars().count() > max;
        if self.summary.trim().is_empty() {
            return Err(PreviewFault::Malformed("a preview needs a summary".into()));
        }
        if too_long(&self.summary, MAX_SUMMARY_CHARS) {
            return Err(PreviewFault::Oversized(format!("a summary of more than {MAX_SUMMARY_CHARS} characters")));
        }
        if self.fields.len() > MAX_FIELDS {
            return Err(PreviewFault::Oversized(format!("more than {MAX_FIELDS} fields")));
        }
        if self.fields.iter().any(|(name, value)| too_long(name, MAX_FIELD_CHARS) || too_long(value, MAX_FIELD_CHARS)) {
            return Err(PreviewFault::Oversized(format!("a field of more than {MAX_FIELD_CHARS} characters")));
        }
        Ok(())
    }
}

/// A preview and its digest, as a confirmation is bound to it and an execution carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BoundPreview {
    pub digest: String,
    #[serde(flatten)]
    pub preview: Preview,
}

impl From<Preview> for BoundPreview {
    fn from(preview: Preview) -> Self {
        Self { digest: preview.digest(), preview }
    }
}

/// The executor's reason for refusing a command at its preview (`refund_exceeds_balance`, ...),
/// told to the person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewRefusal {
    pub code: String,
    #[serde(default)]
    pub message: String,
}

/// What an executor answered to a preview request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreviewAnswer {
    Shown(Preview),
    Refused(PreviewRefusal),
}

/// Why no preview came: the command is then prompted without one or refused, as its rule says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreviewFault {
    /// Not reached in time (or at all).
    Unavailable(String),
    /// An answer that is not a preview: unreadable, missing its summary, or for another command.
    Malformed(String),
    Oversized(String),
    /// The executor has no preview phase.
    NotOffered,
}

impl PreviewFault {
    /// The reason code the command's evidence and the person's reply carry.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "preview_unavailable",
            Self::Malformed(_) => "preview_malformed",
            Self::Oversized(_) => "preview_oversized",
            Self::NotOffered => "preview_not_offered",
        }
    }

    pub fn detail(&self) -> &str {
        match self {
            Self::Unavailable(why) | Self::Malformed(why) | Self::Oversized(why) => why,
            Self::NotOffered => "the executor has no preview phase",
        }
    }
}

/// A preview answer on the wire (every transport): `{"command_id", "status": "preview",
/// "preview": {...}}` or `{"command_id", "status": "refused", "error": {"code", "message"}}`;
/// other fields (a bus's own, beside them) are left aside, but a preview holds only what is shown.
#[derive(Debug, Deserialize)]
struct WireAnswer {
    command_id: Uuid,
    status: WireStatus,
    #[serde(default)]
    preview: Option<Preview>,
    #[serde(default)]
    error: Option<PreviewRefusal>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum WireStatus {
    Preview,
    Refused,
}

/// Reads an executor's preview answer for `command_id`: bounded in size, for this command only.
pub fn read_answer(body: &[u8], command_id: Uuid) -> Result<PreviewAnswer, PreviewFault> {
    if body.len() > MAX_ANSWER_BYTES {
        return Err(PreviewFault::Oversized(format!("an answer of {} bytes (at most {MAX_ANSWER_BYTES})", body.len())));
    }
    let wire: WireAnswer =
        serde_json::from_slice(body).map_err(|e| PreviewFault::Malformed(format!("an unreadable answer: {e}")))?;
    if wire.command_id != command_id {
        return Err(PreviewFault::Malformed(format!("an answer for another command ({})", wire.command_id)));
    }
    match (wire.status, wire.preview, wire.error) {
        (WireStatus::Preview, Some(preview), None) => preview.check().map(|()| PreviewAnswer::Shown(preview)),
        (WireStatus::Refused, None, Some(mut refusal)) if !refusal.code.trim().is_empty() => {
            refusal.message = refusal.message.chars().take(MAX_SUMMARY_CHARS).collect();
            Ok(PreviewAnswer::Refused(refusal))
        }
        _ => Err(PreviewFault::Malformed("a preview needs `preview`, a refusal `error` with a code".into())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(value: serde_json::Value, id: Uuid) -> Result<PreviewAnswer, PreviewFault> {
        read_answer(value.to_string().as_bytes(), id)
    }

    #[test]
    fn a_preview_or_a_refusal_for_this_command_is_read() {
        let id = Uuid::now_v7();
        let shown = read(json!({"command_id": id, "status": "preview", "preview": {"summary": "Order 1234"}}), id);
        assert_eq!(shown, Ok(PreviewAnswer::Shown(Preview { summary: "Order 1234".into(), fields: BTreeMap::new() })));
        let refused = read(json!({"command_id": id, "status": "refused", "error": {"code": "too_much"}}), id);
        assert!(matches!(refused, Ok(PreviewAnswer::Refused(r)) if r.code == "too_much"));
    }

    #[test]
    fn malformed_oversized_and_misaddressed_answers_are_faults() {
        let (id, other) = (Uuid::now_v7(), Uuid::now_v7());
        let fault = |v| read(v, id).expect_err("a fault").code();
        assert_eq!(read_answer(b"not json", id).expect_err("fault").code(), "preview_malformed");
        assert_eq!(
            fault(json!({"command_id": other, "status": "preview", "preview": {"summary": "x"}})),
            "preview_malformed"
        );
        assert_eq!(
            fault(json!({"command_id": id, "status": "preview", "preview": {"summary": " "}})),
            "preview_malformed"
        );
        assert_eq!(fault(json!({"command_id": id, "status": "preview"})), "preview_malformed");
        assert_eq!(fault(json!({"command_id": id, "status": "refused", "error": {"code": ""}})), "preview_malformed");
        let long = "x".repeat(MAX_SUMMARY_CHARS + 1);
        assert_eq!(
            fault(json!({"command_id": id, "status": "preview", "preview": {"summary": long}})),
            "preview_oversized"
        );
        let huge = "x".repeat(MAX_ANSWER_BYTES);
        assert_eq!(
            fault(json!({"command_id": id, "status": "preview", "preview": {"summary": huge}})),
            "preview_oversized"
        );
    }

    #[test]
    fn the_digest_is_of_the_canonical_preview() {
        let a: Preview = serde_json::from_value(json!({"summary": "s", "fields": {"b": "2", "a": "1"}})).expect("a");
        let b: Preview = serde_json::from_value(json!({"fields": {"a": "1", "b": "2"}, "summary": "s"})).expect("b");
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.digest().len(), 64);
        let changed = Preview { summary: "t".into(), ..a.clone() };
        assert_ne!(a.digest(), changed.digest());
    }
}
