//! Example phrasings (issue #48, goal 6): each command may list what people write and what it must
//! read as (`examples = [{ says = "refund #1234 $25 please", values = { order_id = "1234",
//! amount = "25" } }]`). Every load checks them against the whole registry, so that a pattern or a
//! word added for one command that changes how another's phrasings read is refused at once,
//! naming the line, rather than found in a conversation.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::{Audience, Interpretation, Registry};

/// One phrasing of a command and the values it must read with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Example {
    /// What a person writes.
    says: String,
    /// The values it must read with, as the command carries them (`amount = "25"`).
    #[serde(default)]
    values: BTreeMap<String, String>,
    /// The tenant's locale it is read for (how numbers are written; default `en`).
    #[serde(default)]
    locale: Option<String>,
    /// The tenant's currency (ISO 4217), for an amount written with one (`$25`).
    #[serde(default)]
    currency: Option<String>,
}

impl Registry {
    /// Every command's examples read as they say, else each that does not, with its line.
    pub(super) fn reads_its_examples(
        &self,
        raw: &super::build::RawRegistry,
        at: &dyn Fn(usize) -> String,
    ) -> Result<(), super::RegistryError> {
        let examples = raw.commands.iter().flat_map(|(name, c)| c.get_ref().examples.iter().map(move |e| (name, e)));
        let wrong: Vec<String> = examples.filter_map(|(name, example)| self.misread(name, example, at)).collect();
        if wrong.is_empty() { Ok(()) } else { Err(super::RegistryError(wrong)) }
    }

    /// Why `example` of command `name` does not read as it says, if it does not.
    pub(super) fn misread(
        &self,
        name: &str,
        example: &Spanned<Example>,
        at: &dyn Fn(usize) -> String,
    ) -> Option<String> {
        let wanted = example.get_ref();
        let audience = Audience {
            locale: wanted.locale.clone().unwrap_or_else(|| "en".into()),
            currency: wanted.currency.clone(),
        };
        let read = self.interpret_text_for(&wanted.says, &audience);
        let values = |args: &super::Args| -> BTreeMap<String, String> {
            args.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned))).collect()
        };
        let found = match &read {
            Interpretation::Command { spec, args, .. } if spec.name == name && values(args) == wanted.values => {
                return None;
            }
            Interpretation::Command { spec, args, .. } => format!("`{}` with {:?}", spec.name, values(args)),
            other => format!("no command ({})", other.label()),
        };
        let line = at(example.span().start);
        Some(format!(
            "{line}: command `{name}`: example `{}` must read as `{name}` with {:?}, but reads as {found}",
            wanted.says, wanted.values
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    fn parse(text: &str) -> Result<Registry, super::super::RegistryError> {
        let executors: BTreeSet<String> = ["orders".to_owned()].into();
        Registry::parse(Path::new("commands.toml"), text, &executors, Duration::from_secs(60))
    }

    const STATUS: &str = r#"
[commands.order_status]
entity = "order"
action = "status"
patterns = ["status {order_id:id}"]
kind = "read"
executor = "orders"
examples = [{ says = "status 1234?", values = { order_id = "1234" } }]
"#;

    #[test]
    fn a_pattern_that_changes_how_another_commands_example_reads_is_refused_naming_its_line() {
        parse(STATUS).expect("the example reads as it says");
        let wrong = STATUS.replace(r#"order_id = "1234" }"#, r#"order_id = "1235" }"#);
        let problems = parse(&wrong).expect_err("another value").0;
        assert!(
            problems[0].starts_with("commands.toml:8: command `order_status`: example `status 1234?`"),
            "{problems:?}"
        );
        // A word added to the language tables that the example's reading loses: refused too.
        let words = format!("[language.en]\nfillers = [\"status\"]\n{STATUS}");
        let problems = parse(&words).expect_err("the example no longer reads").0;
        assert!(problems[0].ends_with("but reads as no command (no_match)"), "{problems:?}");
    }
}
