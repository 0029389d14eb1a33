//! `chatgate explain "text"`: how a message would be read against the registry and the directory
//! file (`service::explain`), printed for a person or as JSON.

use std::process::ExitCode;

use crate::service::explain::{Explanation, Reader, explain};
use crate::service::settings::Settings;

#[derive(clap::Args)]
pub struct ExplainArgs {
    /// The message, as a person would write it
    text: String,
    /// The tenant it is written to [default: the directory file's first]
    #[arg(long)]
    tenant: Option<String>,
    /// Read for the person the directory file lists with this address (a phone number, an id)
    #[arg(long, conflicts_with = "role")]
    from: Option<String>,
    /// Read for a holder of this role
    #[arg(long)]
    role: Option<String>,
    /// Print the explanation as JSON
    #[arg(long)]
    json: bool,
}

/// Prints how `args.text` reads; exits 1 when it is no command.
pub fn run(settings: &Settings, args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let reader = match (&args.from, &args.role) {
        (Some(address), _) => Reader::From(address.clone()),
        (None, Some(role)) => Reader::Role(role.clone()),
        (None, None) => Reader::Anyone,
    };
    let explained = explain(settings, &args.text, args.tenant.as_deref(), &reader)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&explained)?);
    } else {
        print!("{}", lines(&explained));
    }
    Ok(if explained.command.is_some() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The explanation as a person reads it, a line each.
fn lines(explained: &Explanation) -> String {
    let mut out = format!("{:?} to tenant {}\n", explained.text, explained.tenant);
    let Some(command) = &explained.command else {
        let answer = explained.answer.as_deref().unwrap_or_default();
        out.push_str(&format!("no command ({}): {answer}\n", explained.reading));
        return out;
    };
    let values: Vec<String> =
        command.values.iter().map(|(k, v)| format!("{k} = {}", v.as_str().unwrap_or("?"))).collect();
    let yes = |b: bool| if b { "yes" } else { "no" };
    out.push_str(&format!("command: {} ({}, pattern `{}`)\n", command.name, explained.reading, command.pattern));
    out.push_str(&format!("values: {}\n", values.join(", ")));
    out.push_str(&format!("reads as: {}\n", command.reads_as));
    out.push_str(&format!(
        "{}: confirmation {}, step-up {}, lock {}, preview {}\n",
        command.kind,
        yes(command.confirmation),
        yes(command.step_up),
        command.lock,
        command.preview
    ));
    let missing = match &command.missing_scopes {
        None => String::new(),
        Some(missing) if missing.is_empty() => " — held".into(),
        Some(missing) => format!(" — missing {}", missing.join(", ")),
    };
    out.push_str(&format!("scopes: {}{missing}\n", command.scopes.join(", ")));
    out.push_str(&format!("approval: {}\n", command.approval));
    out
}
