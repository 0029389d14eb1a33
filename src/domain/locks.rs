//! Locks on what a mutation changes (issue #47): the registry names each command's `entity` and
//! its `target` argument (`order` / `order_id`), and a mutation of one resource (`order:1234`)
//! holds it from its admission until it ends, so that two people never change one order at once.

use crate::domain::command::Intent;
use crate::domain::lifecycle::CommandKind;
use crate::domain::names::named_enum;

named_enum! {
    /// What another mutation of a held resource gets (the registry's `lock`): `none`, nothing is
    /// locked and mutations of one resource may run side by side; `refuse`, refused at once and
    /// told which request holds it — a person in a chat hears now, instead of waiting behind
    /// someone else's confirmation; `wait`, admitted and told it waits its turn, then asked to
    /// confirm once the holder has ended (or refused when its TTL runs out first).
    LockRule {
        Off => "none",
        Refuse => "refuse",
        Wait => "wait",
    }
}

/// A thing a mutation changes, as its lock names it: `{entity}:{target}` (`order:1234`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource(String);

impl Resource {
    /// The resource a command of `kind` with `intent` holds under `rule`: none where the registry
    /// locks nothing, else [`Resource::changed_by`].
    pub fn held_by(rule: LockRule, kind: CommandKind, intent: &Intent) -> Option<Self> {
        (rule != LockRule::Off).then(|| Self::changed_by(kind, intent)).flatten()
    }

    /// What a command of `kind` with `intent` changes: none for a read or a command without a
    /// target. A command that changes one may hold it; its end releases whatever it holds.
    pub fn changed_by(kind: CommandKind, intent: &Intent) -> Option<Self> {
        let target = intent.target.as_deref().filter(|t| !t.is_empty())?;
        (kind == CommandKind::Mutation).then(|| Self(format!("{}:{target}", intent.entity)))
    }

    /// A resource as stored or as an operator names it (`order:1234`): an entity, a colon, a target.
    pub fn parse(text: &str) -> Option<Self> {
        let (entity, target) = text.split_once(':')?;
        (!entity.is_empty() && !target.is_empty() && !entity.contains(char::is_whitespace))
            .then(|| Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The kind of thing (`order`).
    pub fn entity(&self) -> &str {
        self.0.split_once(':').map_or("", |(entity, _)| entity)
    }

    /// Which one (`1234`).
    pub fn target(&self) -> &str {
        self.0.split_once(':').map_or("", |(_, target)| target)
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(target: Option<&str>) -> Intent {
        Intent { entity: "order".into(), action: "refund".into(), target: target.map(str::to_owned) }
    }

    #[test]
    fn a_mutation_with_a_target_holds_its_entity_and_target_where_the_registry_locks() {
        let held = Resource::held_by(LockRule::Refuse, CommandKind::Mutation, &intent(Some("1234")));
        let held = held.expect("a refund of order 1234 holds it");
        assert_eq!((held.as_str(), held.entity(), held.target()), ("order:1234", "order", "1234"));
        assert_eq!(Resource::held_by(LockRule::Refuse, CommandKind::Read, &intent(Some("1234"))), None, "reads");
        assert_eq!(Resource::held_by(LockRule::Off, CommandKind::Mutation, &intent(Some("1234"))), None);
        assert_eq!(Resource::held_by(LockRule::Refuse, CommandKind::Mutation, &intent(None)), None, "no target");
        assert_eq!(Resource::held_by(LockRule::Refuse, CommandKind::Mutation, &intent(Some(""))), None);
    }

    #[test]
    fn an_operator_names_a_resource_as_it_is_stored() {
        assert_eq!(Resource::parse("order:1234").map(|r| r.target().to_owned()), Some("1234".into()));
        assert_eq!(Resource::parse("order:a:b").map(|r| r.target().to_owned()), Some("a:b".into()));
        for bad in ["order", ":1234", "order:", "or der:1"] {
            assert_eq!(Resource::parse(bad), None, "{bad}");
        }
    }
}
