//! `chatgate explain` (issue #48, goal 6) and the registry's example phrasings: how a message
//! reads, printed without a running gateway, for a person the directory file lists or a role; and
//! an example a registry change misreads, refused by `check-config` naming its line.

use std::process::{Command, Output, Stdio};

use crate::cli::{chatgate, demo_layout};

fn explain(args: &[&str]) -> Output {
    let root = demo_layout();
    let dir = root.path().join("config");
    let mut command: Command = chatgate(&dir);
    command.args(["--config", "chatgate.toml", "explain"]).args(args);
    command.stdin(Stdio::null()).output().expect("chatgate runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn explain_prints_the_reading_and_what_the_command_asks_for() {
    let refund = explain(&["Hi, please refund #1234 $150, thanks!", "--from", "15550000001"]);
    assert!(refund.status.success(), "{}", String::from_utf8_lossy(&refund.stderr));
    let printed = stdout(&refund);
    for line in [
        "command: refund (normalized, pattern `refund {order_id:id} {amount:money}`)",
        "values: amount = 150, order_id = 1234",
        "reads as: refund 150 on order 1234",
        "mutation: confirmation yes, step-up no, lock refuse, preview optional",
        "scopes: orders:refund — held",
        "approval: 1 of supervisor (`a customer's own limit`); 1 of supervisor (`refund over 100.00`)",
    ] {
        assert!(printed.contains(line), "{line} in:\n{printed}");
    }
    // A role that misses the scope; a command begun in turns; JSON.
    let close = stdout(&explain(&["close account A-1", "--role", "customer"]));
    assert!(close.contains("step-up yes") && close.contains("missing accounts:close"), "{close}");
    let begun = explain(&["refund 1234"]);
    assert!(!begun.status.success(), "no command: exit 1");
    assert!(stdout(&begun).contains("no command (no_match): begins `refund` in turns: asks for amount (money)"));
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&explain(&["rfnd 4410 12.50", "--json"]))).expect("json");
    assert_eq!((json["reading"].as_str(), json["command"].is_null()), (Some("suggested"), true), "{json}");
    let link = stdout(&explain(&["link k7m2 qx9p"]));
    assert!(link.contains("no command (link_offered): from an address nobody lists"), "{link}");
    let nobody = explain(&["refund 1234 25", "--from", "19999999999"]);
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("nobody in tenant `demo` has the address"));
}

#[test]
fn an_example_a_change_misreads_is_refused_naming_its_line() {
    let root = demo_layout();
    let dir = root.path().join("config");
    let commands = std::fs::read_to_string(dir.join("commands.toml")).expect("read");
    // A shop lists "refund" as a number mark by mistake: a refund written exactly still reads, but
    // its examples that need normalizing no longer do, and the registry is refused at once.
    let changed = commands.replacen("number_marks = [\"no.\"", "number_marks = [\"refund\", \"no.\"", 1);
    assert_ne!(changed, commands);
    std::fs::write(dir.join("commands.toml"), &changed).expect("write");
    let refused = chatgate(&dir).args(["--config", "chatgate.toml", "check-config"]).output().expect("runs");
    let err = String::from_utf8_lossy(&refused.stderr);
    let line = changed
        .lines()
        .position(|l| l.contains("says = \"Hi, please refund #1234 $25, thanks!\""))
        .expect("the example")
        + 1;
    assert!(
        !refused.status.success() && err.contains(&format!("commands.toml:{line}: command `refund`: example")),
        "{err}"
    );
}
