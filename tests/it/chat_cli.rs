//! `chatgate chat` as a person uses it: typed lines go to a running gateway as signed WhatsApp
//! messages; the gateway's replies come back to the command's stand-in for the Cloud API and are
//! printed, buttons as numbered choices; typing a number taps one.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cli::{chatgate, free_port, serving, terminate};

/// Lines the chat prints, read on a thread of their own, until one contains `wanted`.
fn until(lines: &mpsc::Receiver<String>, wanted: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = vec![];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(wanted) => {
                seen.push(line);
                return seen;
            }
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    panic!("`{wanted}` never came; the chat printed:\n{}", seen.join("\n"))
}

/// `chatgate chat` with `args`: the process, the lines it prints (read on a thread of their own),
/// and its stdin.
fn start_chat(
    dir: &std::path::Path,
    args: &[&str],
) -> (std::process::Child, mpsc::Receiver<String>, std::process::ChildStdin) {
    let mut chat = chatgate(dir)
        .arg("chat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chat");
    let (sender, lines) = mpsc::channel();
    let stdout = chat.stdout.take().expect("stdout");
    std::thread::spawn(move || BufReader::new(stdout).lines().map_while(Result::ok).for_each(|l| drop(sender.send(l))));
    let stdin = chat.stdin.take().expect("stdin");
    (chat, lines, stdin)
}

#[tokio::test]
async fn a_person_chats_with_a_running_gateway_from_the_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let api_port = free_port();
    let env = [
        ("CHATGATE_WHATSAPP_API_BASE", format!("http://127.0.0.1:{api_port}")),
        ("CHATGATE_WHATSAPP_ACCESS_TOKEN", "chat".to_owned()),
    ];
    let (mut server, base) = serving(dir.path(), &env).await;
    let (mut chat, lines, mut stdin) =
        start_chat(dir.path(), &["--url", &base, "--listen", &format!("127.0.0.1:{api_port}")]);
    let mut say = |text: &str| writeln!(stdin, "{text}").and_then(|()| stdin.flush()).expect("typed");
    until(&lines, "Ctrl-D ends");
    // A typo in the command's word: asked to confirm, the command as it was read, with buttons.
    say("refnd 1234 25");
    until(&lines, "chatgate: Please confirm: refund 25 on order 1234");
    until(&lines, "[1] Yes, go ahead");
    say("1");
    until(&lines, "chatgate: Done: refund 25 on order 1234.");
    // Not understood but close: offered whole, and accepted by its number.
    say("rfnd 4410 12.50");
    until(&lines, "chatgate: Did you mean: refund 4410 12.5?");
    say("1");
    until(&lines, "chatgate: Please confirm: refund 12.5 on order 4410");
    let _ = chat.kill();
    let _ = chat.wait();
    assert_eq!(terminate(&mut server).code(), Some(0));
}

/// `chat --channel telegram`: the same conversation as the demo customer's Telegram account, the
/// replies arriving at the command's stand-in for the Bot API with an inline keyboard.
#[tokio::test]
async fn a_person_chats_on_telegram_from_the_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let api_port = free_port();
    let env = [
        ("CHATGATE_TELEGRAM_API_BASE", format!("http://127.0.0.1:{api_port}")),
        ("CHATGATE_TELEGRAM_BOT_TOKEN", "chat".to_owned()),
    ];
    let (mut server, base) = serving(dir.path(), &env).await;
    let listen = format!("127.0.0.1:{api_port}");
    let (mut chat, lines, mut stdin) =
        start_chat(dir.path(), &["--channel", "telegram", "--url", &base, "--listen", &listen]);
    let mut say = |text: &str| writeln!(stdin, "{text}").and_then(|()| stdin.flush()).expect("typed");
    until(&lines, "CHATGATE_TELEGRAM_API_BASE=");
    say("refund 1234 25");
    until(&lines, "chatgate: Please confirm: refund 25 on order 1234");
    until(&lines, "[1] Yes, go ahead");
    say("1");
    until(&lines, "chatgate: Done: refund 25 on order 1234.");
    let _ = chat.kill();
    let _ = chat.wait();
    assert_eq!(terminate(&mut server).code(), Some(0));
}
