//! What must follow a step, checked from outside: the answers, the commands' states and evidence
//! over the API, the replies the provider stand-in took and the work the executor stand-in did.
//! What the gateway does after answering (admission, dispatch, replies) is waited for, up to
//! `PATIENCE`, and a difference names what was expected and what was there.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::cli::conformance::rig::Rig;
use crate::cli::conformance::scenario::{Expect, Step};
use crate::cli::conformance::steps::Answered;

/// How long what follows a step may take to show.
const PATIENCE: Duration = Duration::from_secs(15);
/// How long a count must stay as expected (no second execution, no extra reply).
const SETTLE: Duration = Duration::from_millis(300);

/// Waits until `probe` gives what `wanted` accepts; the difference otherwise.
async fn eventually<T, F, Fut>(what: &str, wanted: impl Fn(&T) -> bool, probe: F) -> Result<T, String>
where
    T: std::fmt::Debug,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = probe().await?;
        if wanted(&got) {
            return Ok(got);
        }
        if Instant::now() > deadline {
            return Err(format!("{what}, got {got:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn check(rig: &mut Rig, step: &Step, answered: &Answered) -> Result<(), String> {
    let expect = &step.expect;
    // The gateway answers webhooks once their messages are stored; admission follows.
    eventually("the inbox admitted", |backlog: &f64| *backlog == 0.0, || rig.inbox_backlog()).await?;
    if let Some(name) = step.names.as_deref() {
        name_made(rig, name, step.action.message_id(), answered).await?;
    }
    if let Some(status) = expect.status
        && answered.statuses.iter().any(|s| *s != status)
    {
        return Err(format!("expected every answer {status}, got {:?} ({})", answered.statuses, answered.body));
    }
    for (pointer, value) in &expect.body {
        let got = answered.body.pointer(pointer);
        if got != Some(value) {
            return Err(format!("expected {pointer} = {value} in the answer, got {got:?} ({})", answered.body));
        }
    }
    if let Some(count) = expect.commands {
        let what = format!("expected {count} command(s)");
        eventually(&what, |ids: &Vec<_>| ids.len() as u64 == count, || rig.command_ids()).await?;
    }
    for (name, state) in &expect.state {
        let id = rig.id_of(name)?;
        let what = format!("expected `{name}` {state}");
        let wanted = |got: &String| got == state;
        eventually(&what, wanted, || async { Ok(rig.command(id).await?["state"].as_str().unwrap_or("").to_owned()) })
            .await?;
    }
    for (name, state) in &expect.delivery {
        let id = rig.id_of(name)?;
        let what = format!("expected every delivery of `{name}` {state}");
        let wanted = |got: &Vec<String>| !got.is_empty() && got.iter().all(|got| got == state);
        eventually(&what, wanted, || async { Ok(delivery_states(&rig.command(id).await?)) }).await?;
    }
    check_evidence(rig, expect).await?;
    check_counts(rig, expect).await
}

/// The state of each of a command's deliveries, as its view shows them.
fn delivery_states(command: &serde_json::Value) -> Vec<String> {
    let deliveries = command["deliveries"].as_array().map(Vec::as_slice).unwrap_or_default();
    deliveries.iter().map(|d| d["state"].as_str().unwrap_or_default().to_owned()).collect()
}

/// Names the command the step made: the one its chat message (`sent`) started, or the one its
/// answer names (`command_id`, or a recovery's `recovery_command_id`); else the newest no step
/// has named yet. By what the step did, not by which command is newest: a command an earlier
/// step set off (a retry's, a reprocessing's) may be made after this step's on a busy machine.
async fn name_made(rig: &mut Rig, name: &str, sent: Option<&str>, answered: &Answered) -> Result<(), String> {
    let known: Vec<_> = rig.names.values().copied().collect();
    // A recovery's answer names the command it made as `recovery_command_id`.
    let said: Option<uuid::Uuid> = ["command_id", "recovery_command_id"]
        .iter()
        .find_map(|key| answered.body.get(*key).and_then(|id| id.as_str()?.parse().ok()));
    let probe = || async {
        let commands = rig.commands().await?;
        let made = |command: &serde_json::Value| match (sent, said) {
            (Some(message), _) => command["envelope"]["message_ids"]
                .as_array()
                .is_some_and(|ids| ids.iter().any(|id| id.as_str() == Some(message))),
            (None, Some(said)) => command["command_id"].as_str() == Some(said.to_string().as_str()),
            (None, None) => {
                command["command_id"].as_str().and_then(|id| id.parse().ok()).is_some_and(|id| !known.contains(&id))
            }
        };
        Ok(commands.iter().find(|c| made(c)).and_then(|c| c["command_id"].as_str()?.parse::<uuid::Uuid>().ok()))
    };
    let found = eventually(&format!("the command to name `{name}`"), Option::is_some, probe).await?;
    let id = found.ok_or("no new command")?;
    rig.names.insert(name.to_owned(), id);
    rig.evidence_seen.insert(name.to_owned(), 0);
    Ok(())
}

/// The evidence each named command gained in this step, exactly; the others' position moves on.
async fn check_evidence(rig: &mut Rig, expect: &Expect) -> Result<(), String> {
    for (name, kinds) in &expect.evidence {
        let id = rig.id_of(name)?;
        let seen = rig.evidence_seen.get(name).copied().unwrap_or(0);
        let what = format!("expected `{name}` to gain evidence {kinds:?}");
        let probe = || async {
            let all = rig.evidence_kinds(id).await?;
            Ok(all.get(seen..).map(<[String]>::to_vec).unwrap_or_default())
        };
        let got = eventually(&what, |got: &Vec<String>| got.len() >= kinds.len(), probe).await?;
        if &got != kinds {
            return Err(format!("{what}, got {got:?}"));
        }
        rig.evidence_seen.insert(name.clone(), seen + got.len());
    }
    let unchecked: Vec<(String, uuid::Uuid)> = rig
        .names
        .iter()
        .filter(|(name, _)| !expect.evidence.contains_key(*name))
        .map(|(name, id)| (name.clone(), *id))
        .collect();
    for (name, id) in unchecked {
        let count = rig.evidence_kinds(id).await?.len();
        rig.evidence_seen.insert(name, count);
    }
    Ok(())
}

/// Replies taken and work done, waited for and then held for a moment: a second execution or an
/// extra reply that comes just after is a difference too.
async fn check_counts(rig: &mut Rig, expect: &Expect) -> Result<(), String> {
    if let Some(replies) = expect.replies {
        let before = rig.replies_seen;
        let what = format!("expected {replies} repl(ies) in this step");
        let probe = || async { Ok(rig.provider.sent() - before) };
        eventually(&what, |got| *got >= replies, probe).await?;
        tokio::time::sleep(SETTLE).await;
        let got = rig.provider.sent() - before;
        if got != replies {
            return Err(format!("{what}, got {got}"));
        }
    }
    if let Some(executions) = expect.executions {
        let what = format!("expected {executions} execution(s) so far");
        eventually(&what, |got| *got >= executions, || async { Ok(rig.executor.executions()) }).await?;
        tokio::time::sleep(SETTLE).await;
        let got = rig.executor.executions();
        if got != executions {
            return Err(format!("{what}, got {got}"));
        }
    }
    rig.replies_seen = rig.provider.sent();
    Ok(())
}
