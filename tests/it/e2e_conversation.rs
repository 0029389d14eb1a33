//! The conversation end to end: signed webhooks in, the real server, and what the person reads
//! coming out of a local stand-in for the Graph API. Confirm by button, by `YES <code>`, by a
//! bare `yes`; decline; expiry; the wrong person; the same answer twice; a redelivery after
//! execution; a read-only command.

use std::time::Duration;

use chatgate::channels::whatsapp::simulate;
use chatgate::domain::command::ShortRef;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::fake_graph::{FakeGraph, FakeServer, sending_through, text_of};
use crate::helpers::{ADMIN, CUSTOMER, DEMO_NUMBER, Meta, TestApp, TestDb, on_both_backends, spawn_app_with, tenant};

on_both_backends!(
    a_button_tap_confirms_and_the_command_goes_on_to_authorization,
    yes_with_the_code_confirms,
    a_bare_yes_confirms_the_one_pending_confirmation_and_only_then,
    no_declines_and_cancels_with_a_reply,
    an_unanswered_confirmation_expires_and_a_late_answer_is_told_so,
    a_late_answer_before_the_sweep_expires_it_itself,
    another_person_cannot_confirm_and_is_recorded,
    the_same_confirmation_twice_has_one_effect,
    the_original_message_after_execution_replays_the_outcome_without_a_new_prompt,
    a_read_only_command_is_answered_without_a_prompt,
);

pub(crate) struct Chat<'a> {
    db: &'a TestDb,
    graph: FakeGraph,
    pub(crate) app: TestApp,
    seen: usize,
}

impl<'a> Chat<'a> {
    pub(crate) async fn start(db: &'a TestDb) -> Self {
        Self::start_with(db, |_| {}).await
    }

    pub(crate) async fn start_with(db: &'a TestDb, tweak: impl FnOnce(&mut chatgate::config::Config)) -> Self {
        let graph = FakeGraph::start().await;
        let mut config = sending_through(&db.config, &graph);
        tweak(&mut config);
        let app = spawn_app_with(db, config).await;
        Self { db, graph, app, seen: 0 }
    }

    pub(crate) fn meta(&self) -> Meta<'_> {
        Meta::new(&self.app, self.db)
    }

    pub(crate) async fn says(&self, id: &str, from: &str, text: &str) {
        assert_eq!(self.meta().text(id, from, text).await.status(), 200);
    }

    pub(crate) async fn taps(&self, id: &str, from: &str, button_id: &str) {
        let tap = simulate::button_reply(id, from, button_id, "Yes");
        assert_eq!(self.meta().post(&simulate::notification(DEMO_NUMBER, vec![tap], vec![])).await.status(), 200);
    }

    /// The next message sent to a person: (recipient, text, whole body).
    pub(crate) async fn next_reply(&mut self) -> (String, String, Value) {
        let requests = self.graph.wait_for(self.seen + 1, Duration::from_secs(20)).await;
        let body = requests[self.seen].body.clone();
        self.seen += 1;
        (body["to"].as_str().unwrap_or_default().to_owned(), text_of(&body), body)
    }

    /// No further message is sent.
    pub(crate) async fn nothing_more(&self) {
        self.graph.exactly(self.seen).await;
    }

    /// Asks for a refund and returns its command id and the prompt's code and nonce, as the
    /// person sees them.
    pub(crate) async fn refund_prompted(&mut self, id: &str, text: &str) -> (Uuid, String, String) {
        self.says(id, CUSTOMER, text).await;
        let (to, prompt, body) = self.next_reply().await;
        assert_eq!(to, CUSTOMER);
        // The command as the registry says it reads (`reads_as`), never its raw pattern.
        assert!(prompt.starts_with("Please confirm: refund ") && !prompt.contains('{'), "{prompt}");
        let code = prompt.split("YES ").nth(1).and_then(|rest| rest.get(..6)).expect("a code in the prompt").to_owned();
        let yes = body["interactive"]["action"]["buttons"][0]["reply"]["id"].as_str().expect("yes button");
        let nonce = yes.strip_prefix("cg:yes:").expect("the nonce").to_owned();
        (self.command_of(id).await, code, nonce)
    }

    pub(crate) async fn command_of(&self, message_id: &str) -> Uuid {
        crate::helpers::command_of_message(self.db, message_id).await
    }

    pub(crate) async fn state(&self, command_id: Uuid) -> (String, Option<String>) {
        let command = self.db.store.commands().get(&tenant("demo"), command_id).await.expect("read").expect("command");
        (command.lifecycle.state.to_string(), command.reason_code)
    }

    pub(crate) async fn events(&self, command_id: Uuid) -> Vec<String> {
        let moves = self.db.store.commands().transitions(command_id).await.expect("transitions");
        moves.iter().map(|m| m.event.to_string()).collect()
    }

    /// The `command.confirmation.answered` artifacts: (outcome, reason, from).
    pub(crate) async fn answers(&self) -> Vec<(String, String, String)> {
        let mut conn = self.db.raw().await;
        let rows = sqlx::query("SELECT body FROM evidence WHERE kind = $1 ORDER BY seq")
            .bind("command.confirmation.answered")
            .fetch_all(&mut conn)
            .await
            .expect("evidence");
        rows.iter()
            .map(|row| {
                let body: String = sqlx::Row::try_get(row, 0).expect("body");
                let body: Value = serde_json::from_str(&body).expect("json");
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                (text(&body["decision"]["outcome"]), text(&body["reason_code"]), text(&body["decision"]["from"]))
            })
            .collect()
    }

    /// Waits until the command reaches a terminal state, and returns it.
    async fn settled(&self, command_id: Uuid) -> String {
        crate::helpers::settled(self.db, command_id).await
    }

    pub(crate) async fn stop(self) {
        self.app.stop().await.expect("stop");
    }
}

async fn a_button_tap_confirms_and_the_command_goes_on_to_authorization(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let (id, _, nonce) = chat.refund_prompted("wamid.A1", "refund 1234 25.00").await;
    chat.taps("wamid.A2", CUSTOMER, &format!("cg:yes:{nonce}")).await;
    let (to, text, _) = chat.next_reply().await;
    assert_eq!(to, CUSTOMER);
    assert!(text.starts_with("Thanks, confirmed"), "{text}");
    // Confirmed, authorized, dispatched to the demo's `orders` executor (builtin:echo), done.
    let (_, done, _) = chat.next_reply().await;
    assert_eq!(
        done,
        format!("Done: refund 25 on order 1234.\n• amount: 25\n• order_id: 1234\nRef {}", ShortRef::of(id))
    );
    assert_eq!(chat.settled(id).await, "executed");
    assert_eq!(
        chat.events(id).await,
        ["canonicalize", "request_confirmation", "confirm", "submit_for_authorization", "allow", "start", "succeed"]
    );
    let kinds: Vec<String> =
        db.store.evidence().for_command("demo", id).await.expect("evidence").into_iter().map(|a| a.kind).collect();
    assert!(kinds.contains(&"command.confirmation.satisfied".to_owned()), "{kinds:?}");
    assert_eq!(chat.answers().await[0].0, "accepted");
    let status = db.count("SELECT COUNT(*) FROM confirmations WHERE status = $1", "accepted").await;
    assert_eq!(status, 1, "the confirmation is used");
    chat.stop().await;
}

async fn yes_with_the_code_confirms(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let (id, code, _) = chat.refund_prompted("wamid.C1", "refund 1234 25.00").await;
    chat.says("wamid.C2", CUSTOMER, &format!("yes {}", code.to_lowercase())).await;
    assert!(chat.next_reply().await.1.starts_with("Thanks, confirmed"));
    assert!(chat.next_reply().await.1.starts_with("Done: refund 25 on order 1234."));
    assert_eq!(chat.settled(id).await, "executed");
    chat.stop().await;
}

async fn a_bare_yes_confirms_the_one_pending_confirmation_and_only_then(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    chat.says("wamid.Y0", CUSTOMER, "yes").await;
    assert!(chat.next_reply().await.1.contains("nothing waiting"), "nothing pending yet");

    let (first, code1, _) = chat.refund_prompted("wamid.Y1", "refund 1 5").await;
    let (second, code2, _) = chat.refund_prompted("wamid.Y2", "refund 2 5").await;
    chat.says("wamid.Y3", CUSTOMER, "yes").await;
    let (_, several, _) = chat.next_reply().await;
    assert!(several.contains(&code1) && several.contains(&code2), "asks which one: {several}");
    assert_eq!(chat.state(first).await.0, "confirmation_required");

    chat.says("wamid.Y4", CUSTOMER, &format!("NO {code2}")).await;
    chat.next_reply().await;
    chat.says("wamid.Y5", CUSTOMER, "Yes").await;
    assert!(chat.next_reply().await.1.starts_with("Thanks, confirmed"));
    assert_eq!(chat.settled(first).await, "executed");
    assert_eq!(chat.state(second).await.0, "canceled");
    chat.stop().await;
}

async fn no_declines_and_cancels_with_a_reply(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let (id, code, _) = chat.refund_prompted("wamid.N1", "refund 1234 25.00").await;
    chat.says("wamid.N2", CUSTOMER, &format!("NO {code}")).await;
    let (_, text, _) = chat.next_reply().await;
    assert_eq!(text, format!("OK, I won't refund 25 on order 1234. Nothing was changed.\nRef {}", ShortRef::of(id)));
    assert_eq!(chat.state(id).await, ("canceled".into(), Some("confirmation_declined".into())));
    assert_eq!(chat.answers().await[0].0, "declined");
    let canceled = db.store.evidence().for_command("demo", id).await.expect("evidence");
    assert!(canceled.iter().any(|a| a.kind == "command.canceled" && a.body["reason_code"] == "confirmation_declined"));
    chat.nothing_more().await;
    chat.stop().await;
}

pub(crate) async fn expire_now(db: &TestDb, command_id: Uuid) {
    let mut conn = db.raw().await;
    sqlx::query("UPDATE confirmations SET expires_at = 0 WHERE command_id = $1")
        .bind(command_id.to_string())
        .execute(&mut conn)
        .await
        .expect("expire");
}

async fn an_unanswered_confirmation_expires_and_a_late_answer_is_told_so(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let (id, code, _) = chat.refund_prompted("wamid.E1", "refund 1234 25.00").await;
    expire_now(db, id).await;
    // The sweeper cancels it and says so, without anyone writing.
    let (_, text, _) = chat.next_reply().await;
    assert!(text.contains(&code) && text.contains("expired"), "{text}");
    assert_eq!(chat.state(id).await, ("canceled".into(), Some("confirmation_expired".into())));

    chat.says("wamid.E2", CUSTOMER, &format!("YES {code}")).await;
    let (_, late, _) = chat.next_reply().await;
    assert!(late.contains("expired"), "{late}");
    assert_eq!(chat.state(id).await.0, "canceled", "a late yes changes nothing");
    assert_eq!(chat.answers().await[0].0, "too_late");
    chat.stop().await;
}

async fn a_late_answer_before_the_sweep_expires_it_itself(db: &TestDb) {
    let mut chat = Chat::start_with(db, |c| c.outbound.confirmation_sweep_ms = 3_600_000).await;
    // The sweeper's first tick is at start-up; let it pass before the confirmation runs out.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (id, code, _) = chat.refund_prompted("wamid.L1", "refund 1234 25.00").await;
    expire_now(db, id).await;
    chat.says("wamid.L2", CUSTOMER, &format!("YES {code}")).await;
    let (_, text, _) = chat.next_reply().await;
    assert!(text.contains("expired"), "{text}");
    assert_eq!(chat.state(id).await, ("canceled".into(), Some("confirmation_expired".into())));
    assert_eq!(
        chat.answers().await,
        [("too_late".into(), "confirmation_expired".into(), db.engine.pseudonym(CUSTOMER))]
    );
    chat.nothing_more().await;
    chat.stop().await;
}

async fn another_person_cannot_confirm_and_is_recorded(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let (id, code, nonce) = chat.refund_prompted("wamid.W1", "refund 1234 25.00").await;
    chat.says("wamid.W2", ADMIN, &format!("YES {code}")).await;
    let (to, text, _) = chat.next_reply().await;
    assert_eq!(to, ADMIN);
    assert!(text.contains("don't know that confirmation code"), "nothing said about whose it is: {text}");
    // Exactly what a made-up code gets: no reference, nothing that tells the code exists.
    chat.says("wamid.W2b", ADMIN, "YES QQQQQQ").await;
    let (_, made_up, _) = chat.next_reply().await;
    assert_eq!(text, made_up, "someone else's code is answered as a made-up one");
    chat.taps("wamid.W3", ADMIN, &format!("cg:yes:{nonce}")).await;
    chat.next_reply().await;
    assert_eq!(chat.state(id).await.0, "confirmation_required", "confirms nothing");
    let admin = db.engine.pseudonym(ADMIN);
    let answers = chat.answers().await;
    let theirs: Vec<_> = answers.iter().filter(|a| a.1 != "unknown_confirmation").collect();
    assert_eq!((answers.len(), theirs.len()), (3, 2));
    assert!(theirs.iter().all(|a| (a.0.as_str(), a.1.as_str(), &a.2) == ("wrong_actor", "wrong_actor", &admin)));

    // The person who was asked still can.
    chat.says("wamid.W4", CUSTOMER, &format!("YES {code}")).await;
    assert!(chat.next_reply().await.1.starts_with("Thanks, confirmed"));
    chat.stop().await;
}

async fn the_same_confirmation_twice_has_one_effect(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let (id, code, nonce) = chat.refund_prompted("wamid.T1", "refund 1234 25.00").await;
    // Ten answers at once, each in a message of its own.
    let meta = chat.meta();
    let taps: Vec<_> = (0..10)
        .map(|i| {
            let tap = simulate::button_reply(&format!("wamid.T2-{i}"), CUSTOMER, &format!("cg:yes:{nonce}"), "Yes");
            tokio::spawn(meta.request(&simulate::notification(DEMO_NUMBER, vec![tap], vec![])).send())
        })
        .collect();
    for tap in taps {
        assert_eq!(tap.await.expect("task").expect("response").status(), 200);
    }
    assert_eq!(chat.events(id).await.iter().filter(|e| *e == "confirm").count(), 1, "one effect");
    let outcomes: Vec<String> = chat.answers().await.into_iter().map(|a| a.0).collect();
    assert_eq!(outcomes.iter().filter(|o| *o == "accepted").count(), 1, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| *o == "already_answered").count(), 9, "{outcomes:?}");

    // And once more later, by code; and the same message redelivered: nothing new happens.
    chat.says("wamid.T3", CUSTOMER, &format!("YES {code}")).await;
    chat.says("wamid.T3", CUSTOMER, &format!("YES {code}")).await;
    // One "confirmed", one "done" (the demo executor runs at once), and ten answers that say
    // where the command stands — in progress, or done already, depending on how far it got.
    let mut texts = vec![];
    for _ in 0..12 {
        texts.push(chat.next_reply().await.1);
    }
    assert_eq!(texts.iter().filter(|t| t.starts_with("Thanks, confirmed")).count(), 1, "{texts:#?}");
    assert_eq!(texts.iter().filter(|t| t.starts_with("Done: refund 25 on order 1234.")).count(), 1, "{texts:#?}");
    let told =
        |t: &&String| t.starts_with("I'm already working on that") || t.starts_with("That request was already handled");
    assert_eq!(texts.iter().filter(told).count(), 10, "{texts:#?}");
    chat.nothing_more().await;
    assert_eq!(chat.events(id).await.iter().filter(|e| *e == "confirm").count(), 1);
    chat.stop().await;
}

async fn the_original_message_after_execution_replays_the_outcome_without_a_new_prompt(db: &TestDb) {
    // An executor that takes the command and reports the result later, through the ACK API.
    let executor = FakeServer::executor().await;
    let url = executor.url.clone();
    let mut chat = Chat::start_with(db, move |c| c.executors.get_mut("orders").expect("orders").url = url).await;
    let (id, code, _) = chat.refund_prompted("wamid.O1", "refund 1234 25.00").await;
    chat.says("wamid.O2", CUSTOMER, &format!("YES {code}")).await;
    chat.next_reply().await;
    let delivered = executor.wait_for(1, Duration::from_secs(20)).await;
    let key =
        db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command").envelope.idempotency_key;
    assert_eq!(delivered[0].headers["idempotency-key"], key.as_str());
    assert_eq!(delivered[0].body["command_id"], id.to_string());

    // Confirmed and under way: the same request again is told so, not asked again.
    chat.says("wamid.O1b", CUSTOMER, "refund 1234 25").await;
    let (_, under_way, _) = chat.next_reply().await;
    assert!(under_way.starts_with("I'm already working on that request (it is started)"), "{under_way}");

    // The executor reports the result.
    let token = crate::helpers::api_token(db, "demo", "orders-executor", "executions:write");
    let ack = json!({"type": "execution", "status": "succeeded", "result": {"refund_id": "R-77"}});
    let response = chat
        .app
        .client
        .post(chat.app.url(&format!("/v1/commands/{id}/acks")))
        .bearer_auth(&token)
        .json(&ack)
        .send()
        .await
        .expect("ack");
    assert_eq!(response.status(), 200);
    let (_, done, _) = chat.next_reply().await;
    assert_eq!(done, format!("Done: refund 25 on order 1234.\n• refund_id: R-77\nRef {}", ShortRef::of(id)));
    assert_eq!(chat.settled(id).await, "executed");

    // The provider redelivers the original message: already recorded, nothing at all happens.
    chat.says("wamid.O1", CUSTOMER, "refund 1234 25.00").await;
    // The person sends the same request again: the outcome is replayed, nobody is asked again.
    chat.says("wamid.O3", CUSTOMER, "refund 1234 25.00").await;
    let (_, replayed, _) = chat.next_reply().await;
    assert!(replayed.starts_with("That request was already handled (it ended executed)"), "{replayed}");
    assert!(replayed.contains(ShortRef::of(id).as_str()), "{replayed}");
    chat.nothing_more().await;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM confirmations WHERE status <> $1", "none").await,
        1,
        "no second confirmation"
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE state <> $1", "none").await, 1);
    executor.exactly(1).await;
    chat.stop().await;
}

async fn a_read_only_command_is_answered_without_a_prompt(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    chat.says("wamid.S1", CUSTOMER, "order status 1234").await;
    let id = chat.command_of("wamid.S1").await;
    assert_eq!(db.count("SELECT COUNT(*) FROM confirmations WHERE command_id = $1", &id.to_string()).await, 0);
    // The first thing the person hears is the answer (the demo executor echoes the arguments).
    let (to, text, body) = chat.next_reply().await;
    assert_eq!((to.as_str(), body["type"].as_str()), (CUSTOMER, Some("text")));
    assert_eq!(text, format!("Done: order status 1234.\n• order_id: 1234\nRef {}", ShortRef::of(id)));
    assert_eq!(chat.settled(id).await, "executed");
    assert_eq!(chat.events(id).await, ["canonicalize", "submit_for_authorization", "allow", "start", "succeed"]);
    chat.nothing_more().await;
    chat.stop().await;
}
