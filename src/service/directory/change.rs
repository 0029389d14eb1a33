//! A directory change as evidence, in the tenant's chain: who changed whom, from what to what. The
//! person is named by their keyed pseudonym and their name and addresses only by whether they
//! changed, so that erasing a person leaves the chain whole and holding nothing of theirs.

use serde_json::{Value, json};

use crate::domain::directory::Person;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::names::named_enum;

named_enum! {
    /// What happened to a person or a role.
    Change {
        Created => "created",
        Updated => "updated",
        Deactivated => "deactivated",
        Reactivated => "reactivated",
        Deleted => "deleted",
        Erased => "erased",
        RoleSet => "role_set",
        RoleRemoved => "role_removed",
        Linked => "linked",
        Unlinked => "unlinked",
    }
}

/// Who made a change: an operator (a token's issuer and subject), an import, or the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangedBy {
    Operator(String),
    Import(String),
    File,
    /// The person themselves: with a one-time link code, or answering a link's notice.
    Themselves,
}

impl ChangedBy {
    fn describe(&self) -> Value {
        match self {
            Self::Operator(id) => json!({"operator": id}),
            Self::Import(id) => json!({"import_by": id}),
            Self::File => json!({"file": "directory.toml"}),
            Self::Themselves => json!({"person": "themselves"}),
        }
    }
}

/// What the evidence keeps of a person: nothing that identifies them.
fn state(person: &Person) -> Value {
    json!({"roles": person.roles, "active": person.active, "locale": person.locale})
}

/// The evidence of a change of a person (`before` is none when they were made, `after` when they
/// went).
pub fn person_evidence(
    change: Change,
    pseudonym: String,
    before: Option<&Person>,
    after: Option<&Person>,
    by: &ChangedBy,
) -> EvidenceDraft {
    let mut decision = person_change(change, pseudonym, before, after);
    decision["by"] = by.describe();
    draft(decision)
}

/// The evidence of a batch of changes (an import's): each change as `person_evidence` says it.
pub fn batch_evidence(changes: Vec<Value>, by: &ChangedBy) -> EvidenceDraft {
    draft(json!({"change": "imported", "by": by.describe(), "people": changes}))
}

/// One person's change: who (their pseudonym), what it was called, from what to what, and which
/// personal data changed (never the data).
pub fn person_change(change: Change, pseudonym: String, before: Option<&Person>, after: Option<&Person>) -> Value {
    let changed = |field: fn(&Person) -> String| match (before, after) {
        (Some(b), Some(a)) => field(b) != field(a),
        _ => true,
    };
    let mut fields = vec![];
    if changed(|p| p.name.clone()) {
        fields.push("name");
    }
    if changed(|p| format!("{:?}", p.addresses)) {
        fields.push("addresses");
    }
    json!({
        "change": change.as_str(),
        "person": pseudonym,
        "from": before.map(state),
        "to": after.map(state),
        "personal_data_changed": fields,
    })
}

/// The evidence of a role set or removed.
pub fn role_evidence(name: &str, from: Option<&Value>, to: Option<&Value>, by: &ChangedBy) -> EvidenceDraft {
    let change = if to.is_some() { Change::RoleSet } else { Change::RoleRemoved };
    draft(json!({"change": change.as_str(), "role": name, "by": by.describe(), "from": from, "to": to}))
}

fn draft(decision: Value) -> EvidenceDraft {
    EvidenceDraft::of_tenant(EvidenceKind::DirectoryChanged, decision)
}
