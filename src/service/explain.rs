//! How a message would be read, without a running gateway (issue #48, goal 6; `chatgate explain`,
//! as StackStorm's `st2 action-alias test`): the registry's reading of the text for a tenant — the
//! rule, the command, its values — and what its command would ask for: a confirmation, a step-up,
//! approval, the scopes a person or a role holds or misses. What intake does with state (a
//! request to correct, a conversation open, a link to undo) is not known here; a command begun in
//! turns is, and what a message about linking a person's channels asks.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::domain::command::envelope::Args;
use crate::domain::directory::{Roles, Tenant};
use crate::domain::registry::approvals::{Verdict, evaluate};
use crate::domain::registry::{CommandSpec, Interpretation, Linking, Step};
use crate::service::settings::Settings;

/// For whom the message is read: anyone, a role's holder, or a person the directory file lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reader {
    Anyone,
    Role(String),
    /// A person's address (a phone number, a Telegram id).
    From(String),
}

/// A reader's roles, and the scopes they hold.
type Standing = (BTreeSet<String>, BTreeSet<String>);

/// How a message reads.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub text: String,
    pub tenant: String,
    /// A command's reading rule (`exact`, `normalized`, `fuzzy`, ...), or why it is none.
    pub reading: String,
    pub command: Option<ExplainedCommand>,
    /// What the person is answered when it is no command.
    pub answer: Option<String>,
}

/// The command a message reads as, and what it would ask for.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainedCommand {
    pub name: String,
    pub pattern: String,
    pub values: Args,
    /// How it reads to the person ("refund 25 on order 1234").
    pub reads_as: String,
    pub kind: String,
    pub confirmation: bool,
    pub step_up: bool,
    pub lock: String,
    pub preview: String,
    pub scopes: Vec<String>,
    /// The scopes the reader misses (none for `Anyone`: not known).
    pub missing_scopes: Option<Vec<String>>,
    /// The approval policy's verdict for the reader's roles: `none`, what it needs, or a refusal.
    pub approval: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("no tenant `{0}` in the directory file")]
    NoTenant(String),
    #[error("no role `{0}` in tenant `{1}`")]
    NoRole(String, String),
    #[error("nobody in tenant `{1}` has the address `{0}` in the directory file")]
    NoPerson(String, String),
}

/// How `text` reads for `reader` of `tenant` (the first the directory file lists when none).
pub fn explain(
    settings: &Settings,
    text: &str,
    tenant: Option<&str>,
    reader: &Reader,
) -> Result<Explanation, ExplainError> {
    let tenant = match tenant {
        Some(name) => settings.tenants.tenant(name).ok_or_else(|| ExplainError::NoTenant(name.to_owned()))?,
        None => settings.tenants.tenants().next().ok_or_else(|| ExplainError::NoTenant("(any)".into()))?,
    };
    let roles = roles_of(settings, tenant, reader)?;
    let registry = &settings.registry;
    // Read before any command, by the gateway itself (docs/LANGUAGE.md, "Linking").
    if let Some(linking) = registry.linking(text) {
        let (reading, answer) = match linking {
            Linking::Ask => ("link_code", "a listed person is sent a one-time code for linking another channel"),
            Linking::Offer(_) => ("link_offered", "from an address nobody lists: the code links it to its person"),
            Linking::NotMe => ("not_me", "undoes the person's latest link, if one may be; else read as usual"),
        };
        let (text, tenant) = (text.to_owned(), tenant.id.to_string());
        return Ok(Explanation { text, tenant, reading: reading.into(), command: None, answer: Some(answer.into()) });
    }
    let may = |spec: &CommandSpec| roles.as_ref().is_none_or(|(_, held)| spec.scopes.is_subset(held));
    // Read as intake reads a first message (`Registry::step`, no conversation open).
    let (read, begins) = match registry.step(None, text, &tenant.audience(), may, 1) {
        Step::Ask { begun, missing, .. } => {
            let begins =
                format!("begins `{}` in turns: asks for {} ({})", begun.command, missing.name, missing.kind.as_str());
            (registry.interpret_text_for(text, &tenant.audience()), Some(begins))
        }
        Step::Alone(read) | Step::Complete(read) => (read, None),
        Step::Ended(_) => (registry.interpret_text_for(text, &tenant.audience()), None),
    };
    let (command, answer) = match &read {
        Interpretation::Command { spec, args, reading, .. } => {
            let mut explained = command(spec, args, tenant, roles.as_ref());
            explained.pattern = reading.pattern.clone();
            explained.confirmation |= reading.needs_confirmation();
            (Some(explained), None)
        }
        other => (None, Some(begins.unwrap_or_else(|| answer(other)))),
    };
    Ok(Explanation {
        text: text.to_owned(),
        tenant: tenant.id.to_string(),
        reading: read.label().to_owned(),
        command,
        answer,
    })
}

/// The reader's roles and their scopes; `None` for anyone.
fn roles_of(settings: &Settings, tenant: &Tenant, reader: &Reader) -> Result<Option<Standing>, ExplainError> {
    let empty = (Roles::default(), vec![]);
    let (roles, people) = settings.seed.tenants.get(&tenant.id).unwrap_or(&empty);
    let names: BTreeSet<String> = match reader {
        Reader::Anyone => return Ok(None),
        Reader::Role(role) if roles.0.contains_key(role) => [role.clone()].into(),
        Reader::Role(role) => return Err(ExplainError::NoRole(role.clone(), tenant.id.to_string())),
        Reader::From(address) => {
            let person = people.iter().find(|p| p.addresses.iter().any(|a| a.value == *address));
            let person = person.ok_or_else(|| ExplainError::NoPerson(address.clone(), tenant.id.to_string()))?;
            person.roles.iter().cloned().collect()
        }
    };
    let scopes = names.iter().filter_map(|name| roles.0.get(name)).flatten().cloned().collect();
    Ok(Some((names, scopes)))
}

fn command(spec: &CommandSpec, args: &Args, tenant: &Tenant, reader: Option<&Standing>) -> ExplainedCommand {
    let no_roles = BTreeSet::new();
    let approval = match evaluate(&spec.approvals, args, reader.map_or(&no_roles, |(roles, _)| roles)) {
        Verdict::Alone => "none".to_owned(),
        Verdict::Refused { rule } => format!("refused by rule `{rule}`"),
        Verdict::Needs(needs) => {
            let each = needs.iter().map(|(rule, need)| {
                let roles: Vec<&str> = need.approvers.iter().map(String::as_str).collect();
                format!("{} of {} (`{rule}`)", need.quorum, roles.join(" or "))
            });
            each.collect::<Vec<_>>().join("; ")
        }
    };
    ExplainedCommand {
        name: spec.name.clone(),
        pattern: String::new(),
        values: args.clone(),
        reads_as: spec.reads_in(args, &tenant.locale),
        kind: spec.kind.to_string(),
        confirmation: spec.confirmation,
        step_up: spec.step_up,
        lock: spec.lock.to_string(),
        preview: spec.preview.to_string(),
        scopes: spec.scopes.iter().cloned().collect(),
        missing_scopes: reader.map(|(_, held)| spec.scopes.difference(held).cloned().collect()),
        approval,
    }
}

/// What a message that reads as no command is answered, in a line.
fn answer(read: &Interpretation<'_>) -> String {
    match read {
        Interpretation::DidYouMean { accept: Some(text), .. } => format!("did you mean: {text}? (with a button)"),
        Interpretation::DidYouMean { spec, accept: None } => format!("did you mean: {}?", spec.usage()),
        Interpretation::BrokenRule { broken, .. } => {
            format!("refused: {} breaks its rule ({} {})", broken.value, broken.rule, broken.limit)
        }
        Interpretation::TwoReadings { value, readings: (ours, other), .. } => {
            format!("asked back: {value} could be {ours} or {other}")
        }
        Interpretation::Ambiguous(specs) => {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            format!("ambiguous, never guessed: {}", names.join(", "))
        }
        Interpretation::Negated(spec) => format!("said not to be done: `{}` is not run", spec.name),
        Interpretation::Several => "two requests in one message: not run, one at a time".into(),
        Interpretation::Courtesy => "courtesy: answered in a few words".into(),
        Interpretation::Help | Interpretation::NoMatch | Interpretation::Command { .. } => "the help text".into(),
    }
}
