//! Reply and prompt templates, per channel and locale, with a fallback locale.
//!
//! Templates are minijinja text under `templates/{channel}/{locale}/{name}.txt`. Undefined
//! variables are errors, and `check` renders every template against sample data, so a broken
//! template stops `check-config` and `serve` instead of failing in a conversation at 3 a.m.

use std::collections::BTreeSet;
use std::path::Path;

use super::samples::{samples, vars_of};
use crate::domain::replies::Reply;
use minijinja::{Environment, UndefinedBehavior, Value};

/// The locale every channel must have in full; others may leave templates out.
pub const FALLBACK_LOCALE: &str = "en";

/// The set a channel without its own folder uses: Twilio carries WhatsApp and SMS text, which
/// reads the same; a `twilio/` folder makes it differ.
pub const SHARED_CHANNEL: &str = "whatsapp";

/// The templates every channel needs (`samples` renders each with the variables its replies carry).
pub const REQUIRED: &[&str] = &[
    "confirmation_prompt",
    "declined",
    "expired",
    "rejected",
    "in_progress",
    "already_done",
    "executed",
    "failed",
    "step_up_required",
    "approval_required",
    "approval_request",
    "approval_answer",
    "button_approve",
    "button_deny",
    "help",
    "confirmed",
    "canceled",
    "button_yes",
    "button_no",
    "suggestion",
    "button_accept",
    "waiting_turn",
    "ask_value",
    "turns_ended",
    "courtesy",
    "link",
    // The built-in chat commands' replies (the registry's `reply`).
    "requests",
    "request_status",
    "why",
    "trace",
    "evidence",
    "agents",
    "recovered",
    "agent_changed",
];

/// WhatsApp's limit on an interactive button's title; templates named `button_*` must fit.
pub const BUTTON_TITLE_MAX: usize = 20;

/// The shipped templates, embedded so that the binary runs from any folder.
const SHIPPED: &[(&str, &str)] = &[
    ("whatsapp/en/confirmation_prompt", include_str!("../../../templates/whatsapp/en/confirmation_prompt.txt")),
    ("whatsapp/en/declined", include_str!("../../../templates/whatsapp/en/declined.txt")),
    ("whatsapp/en/expired", include_str!("../../../templates/whatsapp/en/expired.txt")),
    ("whatsapp/en/rejected", include_str!("../../../templates/whatsapp/en/rejected.txt")),
    ("whatsapp/en/in_progress", include_str!("../../../templates/whatsapp/en/in_progress.txt")),
    ("whatsapp/en/already_done", include_str!("../../../templates/whatsapp/en/already_done.txt")),
    ("whatsapp/en/executed", include_str!("../../../templates/whatsapp/en/executed.txt")),
    ("whatsapp/en/failed", include_str!("../../../templates/whatsapp/en/failed.txt")),
    ("whatsapp/en/step_up_required", include_str!("../../../templates/whatsapp/en/step_up_required.txt")),
    ("whatsapp/en/approval_required", include_str!("../../../templates/whatsapp/en/approval_required.txt")),
    ("whatsapp/en/approval_request", include_str!("../../../templates/whatsapp/en/approval_request.txt")),
    ("whatsapp/en/approval_answer", include_str!("../../../templates/whatsapp/en/approval_answer.txt")),
    ("whatsapp/en/button_approve", include_str!("../../../templates/whatsapp/en/button_approve.txt")),
    ("whatsapp/en/button_deny", include_str!("../../../templates/whatsapp/en/button_deny.txt")),
    ("whatsapp/en/help", include_str!("../../../templates/whatsapp/en/help.txt")),
    ("whatsapp/en/confirmed", include_str!("../../../templates/whatsapp/en/confirmed.txt")),
    ("whatsapp/en/canceled", include_str!("../../../templates/whatsapp/en/canceled.txt")),
    ("whatsapp/en/button_yes", include_str!("../../../templates/whatsapp/en/button_yes.txt")),
    ("whatsapp/en/button_no", include_str!("../../../templates/whatsapp/en/button_no.txt")),
    ("whatsapp/en/suggestion", include_str!("../../../templates/whatsapp/en/suggestion.txt")),
    ("whatsapp/en/button_accept", include_str!("../../../templates/whatsapp/en/button_accept.txt")),
    ("whatsapp/pt/confirmation_prompt", include_str!("../../../templates/whatsapp/pt/confirmation_prompt.txt")),
    ("whatsapp/pt/declined", include_str!("../../../templates/whatsapp/pt/declined.txt")),
    ("whatsapp/pt/expired", include_str!("../../../templates/whatsapp/pt/expired.txt")),
    ("whatsapp/pt/rejected", include_str!("../../../templates/whatsapp/pt/rejected.txt")),
    ("whatsapp/pt/in_progress", include_str!("../../../templates/whatsapp/pt/in_progress.txt")),
    ("whatsapp/pt/already_done", include_str!("../../../templates/whatsapp/pt/already_done.txt")),
    ("whatsapp/pt/executed", include_str!("../../../templates/whatsapp/pt/executed.txt")),
    ("whatsapp/pt/failed", include_str!("../../../templates/whatsapp/pt/failed.txt")),
    ("whatsapp/pt/step_up_required", include_str!("../../../templates/whatsapp/pt/step_up_required.txt")),
    ("whatsapp/pt/approval_required", include_str!("../../../templates/whatsapp/pt/approval_required.txt")),
    ("whatsapp/pt/approval_request", include_str!("../../../templates/whatsapp/pt/approval_request.txt")),
    ("whatsapp/pt/approval_answer", include_str!("../../../templates/whatsapp/pt/approval_answer.txt")),
    ("whatsapp/pt/button_approve", include_str!("../../../templates/whatsapp/pt/button_approve.txt")),
    ("whatsapp/pt/button_deny", include_str!("../../../templates/whatsapp/pt/button_deny.txt")),
    ("whatsapp/pt/help", include_str!("../../../templates/whatsapp/pt/help.txt")),
    ("whatsapp/pt/confirmed", include_str!("../../../templates/whatsapp/pt/confirmed.txt")),
    ("whatsapp/pt/canceled", include_str!("../../../templates/whatsapp/pt/canceled.txt")),
    ("whatsapp/pt/button_yes", include_str!("../../../templates/whatsapp/pt/button_yes.txt")),
    ("whatsapp/pt/button_no", include_str!("../../../templates/whatsapp/pt/button_no.txt")),
    ("whatsapp/pt/suggestion", include_str!("../../../templates/whatsapp/pt/suggestion.txt")),
    ("whatsapp/pt/button_accept", include_str!("../../../templates/whatsapp/pt/button_accept.txt")),
    ("whatsapp/en/requests", include_str!("../../../templates/whatsapp/en/requests.txt")),
    ("whatsapp/en/request_status", include_str!("../../../templates/whatsapp/en/request_status.txt")),
    ("whatsapp/en/why", include_str!("../../../templates/whatsapp/en/why.txt")),
    ("whatsapp/en/waiting_turn", include_str!("../../../templates/whatsapp/en/waiting_turn.txt")),
    ("whatsapp/en/trace", include_str!("../../../templates/whatsapp/en/trace.txt")),
    ("whatsapp/en/evidence", include_str!("../../../templates/whatsapp/en/evidence.txt")),
    ("whatsapp/en/agents", include_str!("../../../templates/whatsapp/en/agents.txt")),
    ("whatsapp/en/recovered", include_str!("../../../templates/whatsapp/en/recovered.txt")),
    ("whatsapp/en/agent_changed", include_str!("../../../templates/whatsapp/en/agent_changed.txt")),
    ("whatsapp/pt/requests", include_str!("../../../templates/whatsapp/pt/requests.txt")),
    ("whatsapp/pt/request_status", include_str!("../../../templates/whatsapp/pt/request_status.txt")),
    ("whatsapp/pt/why", include_str!("../../../templates/whatsapp/pt/why.txt")),
    ("whatsapp/pt/waiting_turn", include_str!("../../../templates/whatsapp/pt/waiting_turn.txt")),
    ("whatsapp/pt/trace", include_str!("../../../templates/whatsapp/pt/trace.txt")),
    ("whatsapp/pt/evidence", include_str!("../../../templates/whatsapp/pt/evidence.txt")),
    ("whatsapp/pt/agents", include_str!("../../../templates/whatsapp/pt/agents.txt")),
    ("whatsapp/pt/recovered", include_str!("../../../templates/whatsapp/pt/recovered.txt")),
    ("whatsapp/pt/agent_changed", include_str!("../../../templates/whatsapp/pt/agent_changed.txt")),
    ("whatsapp/en/ask_value", include_str!("../../../templates/whatsapp/en/ask_value.txt")),
    ("whatsapp/en/turns_ended", include_str!("../../../templates/whatsapp/en/turns_ended.txt")),
    ("whatsapp/en/courtesy", include_str!("../../../templates/whatsapp/en/courtesy.txt")),
    ("whatsapp/pt/ask_value", include_str!("../../../templates/whatsapp/pt/ask_value.txt")),
    ("whatsapp/pt/turns_ended", include_str!("../../../templates/whatsapp/pt/turns_ended.txt")),
    ("whatsapp/pt/courtesy", include_str!("../../../templates/whatsapp/pt/courtesy.txt")),
    ("whatsapp/en/link", include_str!("../../../templates/whatsapp/en/link.txt")),
    ("whatsapp/pt/link", include_str!("../../../templates/whatsapp/pt/link.txt")),
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("no template `{name}` for {channel} in locale {locale} or {FALLBACK_LOCALE}")]
    Missing { channel: String, locale: String, name: String },
    #[error("template `{0}`: {1}")]
    Render(String, String),
    #[error("cannot read templates: {0}")]
    Read(String),
}

#[derive(Debug, Clone)]
pub struct Templates {
    env: Environment<'static>,
    /// `(channel, locale)` pairs present.
    locales: BTreeSet<(String, String)>,
}

impl Templates {
    /// The shipped templates by name (`whatsapp/en/expired`) with their text, as a folder of
    /// templates holds them (`{name}.txt`).
    pub fn shipped_sources() -> impl Iterator<Item = (&'static str, &'static str)> {
        SHIPPED.iter().copied()
    }

    /// The templates under `dir`; the shipped ones when `dir` does not exist and `shipped` allows.
    pub fn load(dir: &Path, shipped: bool) -> Result<Self, TemplateError> {
        if !dir.is_dir() && shipped {
            return Self::from_sources(SHIPPED.iter().map(|(n, s)| ((*n).to_owned(), (*s).to_owned())));
        }
        let mut sources = vec![];
        let read =
            |path: &Path| std::fs::read_dir(path).map_err(|e| TemplateError::Read(format!("{}: {e}", path.display())));
        for channel in read(dir)?.flatten().filter(|e| e.path().is_dir()) {
            for locale in read(&channel.path())?.flatten().filter(|e| e.path().is_dir()) {
                for file in read(&locale.path())?.flatten() {
                    let path = file.path();
                    let Some(stem) = path
                        .file_stem()
                        .and_then(|s| s.to_str())
                        .filter(|_| path.extension().is_some_and(|e| e == "txt"))
                    else {
                        continue;
                    };
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| TemplateError::Read(format!("{}: {e}", path.display())))?;
                    let name = format!(
                        "{}/{}/{stem}",
                        channel.file_name().to_string_lossy(),
                        locale.file_name().to_string_lossy()
                    );
                    sources.push((name, text));
                }
            }
        }
        Self::from_sources(sources)
    }

    /// The shipped templates.
    pub fn shipped() -> Result<Self, TemplateError> {
        Self::from_sources(SHIPPED.iter().map(|(n, s)| ((*n).to_owned(), (*s).to_owned())))
    }

    pub(crate) fn from_sources(sources: impl IntoIterator<Item = (String, String)>) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // Chat text is not HTML.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_keep_trailing_newline(false);
        let mut locales = BTreeSet::new();
        for (name, source) in sources {
            let mut parts = name.splitn(3, '/');
            if let (Some(channel), Some(locale), Some(_)) = (parts.next(), parts.next(), parts.next()) {
                locales.insert((channel.to_owned(), locale.to_owned()));
            }
            env.add_template_owned(name.clone(), source).map_err(|e| TemplateError::Render(name, e.to_string()))?;
        }
        Ok(Self { env, locales })
    }

    /// Renders `name` for a channel in `locale`, falling back to [`FALLBACK_LOCALE`].
    pub fn render(
        &self,
        channel: &str,
        locale: &str,
        name: &str,
        vars: &serde_json::Value,
    ) -> Result<String, TemplateError> {
        let channel = if self.locales.iter().any(|(c, _)| c == channel) { channel } else { SHARED_CHANNEL };
        let candidates = [format!("{channel}/{locale}/{name}"), format!("{channel}/{FALLBACK_LOCALE}/{name}")];
        let template = candidates.iter().find_map(|n| self.env.get_template(n).ok()).ok_or_else(|| {
            TemplateError::Missing { channel: channel.to_owned(), locale: locale.to_owned(), name: name.to_owned() }
        })?;
        let text = template
            .render(Value::from_serialize(vars))
            .map_err(|e| TemplateError::Render(template.name().to_owned(), e.to_string()))?;
        Ok(text.trim().to_owned())
    }

    /// Renders every required template in every locale of every channel against sample data;
    /// one line per problem.
    pub fn check(&self) -> Result<(), Vec<String>> {
        let mut problems = vec![];
        let channels: BTreeSet<&str> = self.locales.iter().map(|(c, _)| c.as_str()).collect();
        if channels.is_empty() {
            problems.push("no templates found".to_owned());
        }
        for channel in channels {
            if !self.locales.contains(&(channel.to_owned(), FALLBACK_LOCALE.to_owned())) {
                problems.push(format!("{channel}: the fallback locale `{FALLBACK_LOCALE}` is missing"));
            }
            for (_, locale) in self.locales.iter().filter(|(c, _)| c == channel) {
                for sample in samples() {
                    self.check_sample(channel, locale, &sample, &mut problems);
                }
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// Renders `sample`'s template and its buttons' in `channel` and `locale`.
    fn check_sample(&self, channel: &str, locale: &str, sample: &Reply, problems: &mut Vec<String>) {
        let vars = vars_of(sample);
        for name in std::iter::once(sample.template()).chain(sample.button_templates().iter().copied()) {
            match self.render(channel, locale, name, &vars) {
                Err(e) => problems.push(e.to_string()),
                Ok(title) if name.starts_with("button_") && title.chars().count() > BUTTON_TITLE_MAX => {
                    problems.push(format!(
                        "template `{channel}/{locale}/{name}`: a button title has at most \
                         {BUTTON_TITLE_MAX} characters, `{title}` has {}",
                        title.chars().count()
                    ));
                }
                Ok(_) => {}
            }
        }
    }

    pub fn locales(&self) -> impl Iterator<Item = &(String, String)> {
        self.locales.iter()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The variables the first sample of `name` renders with.
    fn sample_vars(name: &str) -> serde_json::Value {
        let samples = samples();
        let sample = samples.iter().find(|s| s.template() == name || s.button_templates().contains(&name));
        sample.map(vars_of).unwrap_or_else(|| json!({}))
    }

    #[test]
    fn every_shipped_template_renders_in_every_shipped_locale() {
        let templates = Templates::shipped().expect("shipped templates parse");
        templates.check().expect("every template renders against its sample data");
        let locales: Vec<_> = templates.locales().map(|(c, l)| format!("{c}/{l}")).collect();
        assert_eq!(locales, ["whatsapp/en", "whatsapp/pt"]);
        let text = templates
            .render("whatsapp", "en", "confirmation_prompt", &sample_vars("confirmation_prompt"))
            .expect("render");
        assert!(text.contains("K7Q2") && text.contains("1234"), "{text}");
        let pt = templates.render("whatsapp", "pt", "help", &sample_vars("help")).expect("render");
        assert_ne!(pt, templates.render("whatsapp", "en", "help", &sample_vars("help")).expect("render"));
    }

    #[test]
    fn a_missing_locale_falls_back_and_a_missing_template_is_an_error() {
        let templates = Templates::shipped().expect("shipped");
        let en = templates.render("whatsapp", "en", "declined", &sample_vars("declined")).expect("en");
        assert_eq!(templates.render("whatsapp", "fr", "declined", &sample_vars("declined")).expect("fallback"), en);
        assert!(matches!(templates.render("whatsapp", "en", "nope", &json!({})), Err(TemplateError::Missing { .. })));
    }

    #[test]
    fn a_channel_without_its_own_folder_uses_the_shared_set_and_one_with_a_folder_its_own() {
        let templates = Templates::shipped().expect("shipped");
        let vars = sample_vars("help");
        let shared = templates.render(SHARED_CHANNEL, "pt", "help", &vars).expect("whatsapp");
        assert_eq!(templates.render("twilio", "pt", "help", &vars).expect("shared"), shared);
        let own = Templates::from_sources([("twilio/en/help".to_owned(), "sms help".to_owned())]).expect("parses");
        assert_eq!(own.render("twilio", "pt", "help", &vars).expect("own fallback locale"), "sms help");
        assert!(matches!(own.render("twilio", "en", "declined", &json!({})), Err(TemplateError::Missing { .. })));
    }

    #[test]
    fn a_broken_or_incomplete_template_set_fails_the_check() {
        let syntax = Templates::from_sources([("whatsapp/en/help".to_owned(), "{% if %}".to_owned())]);
        assert!(matches!(syntax, Err(TemplateError::Render(..))));
        let mut sources: Vec<(String, String)> =
            SHIPPED.iter().map(|(n, s)| ((*n).to_owned(), (*s).to_owned())).collect();
        // An undefined variable is an error, found by the check, not in a conversation.
        sources.push(("whatsapp/pt/declined".to_owned(), "Cancelado: {{ comand }}".to_owned()));
        let problems = Templates::from_sources(sources).expect("parses").check().expect_err("undefined variable");
        assert!(problems.iter().any(|p| p.contains("whatsapp/pt/declined")), "{problems:?}");
        // A button title WhatsApp would refuse is found by the check too.
        let mut long_title: Vec<(String, String)> =
            SHIPPED.iter().map(|(n, s)| ((*n).to_owned(), (*s).to_owned())).collect();
        long_title.push(("whatsapp/pt/button_yes".to_owned(), "Sim, pode avançar com isso".to_owned()));
        let problems = Templates::from_sources(long_title).expect("parses").check().expect_err("too long");
        assert!(problems.iter().any(|p| p.contains("button_yes") && p.contains("at most 20")), "{problems:?}");
        let only_pt = Templates::from_sources([("whatsapp/pt/help".to_owned(), "ajuda".to_owned())]).expect("parses");
        let problems = only_pt.check().expect_err("no fallback");
        assert!(problems.iter().any(|p| p.contains("fallback locale")), "{problems:?}");
    }
}
