//! Observability and recovery over the conversation, end to end: signed webhooks in, the real
//! server, and what people read coming out of the Graph API stand-in. A customer asks `status`,
//! `status <ref>` and `why <ref>` about a refused, a confirmed and a failed command and sees only
//! their own; an operator lists `failures`, retries one from the chat with confirmation (the retry
//! executes once), is told what is allowed when the state does not permit an action, and
//! compensates an executed refund after a step-up. The API and the chat drive the same recovery
//! code against the same states and get the same outcomes.

use std::collections::HashMap;
use std::time::Duration;

use chatgate::domain::command::ShortRef;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::fake_executor::{FakeExecutor, Fault};
use crate::fake_graph::{FakeGraph, sending_through, text_of};
use crate::helpers::{ADMIN, CUSTOMER, Meta, TestApp, TestDb, api_token, on_both_backends, spawn_app_with, tenant};

on_both_backends!(
    a_customer_asks_about_a_refused_a_confirmed_and_a_failed_command_and_sees_only_their_own,
    an_operator_lists_failures_and_retries_one_from_the_chat_which_executes_once,
    recovery_in_the_wrong_state_is_refused_with_what_is_allowed_and_customers_cannot_recover,
    compensate_from_the_chat_ends_with_the_original_compensated,
    the_api_and_the_chat_recover_through_the_same_code_with_the_same_outcomes,
    long_lists_continue_with_more_and_operators_read_trace_and_evidence,
    references_resolve_through_the_api_and_older_commands_get_theirs,
    an_agent_move_is_checked_again_when_it_runs,
);

/// The first call of the executor fails (500), every later one succeeds; orders ending in 13
/// are refused for good.
fn first_call_fails(n: u64) -> Fault {
    if n == 1 { Fault::ServerError } else { Fault::None }
}

pub(crate) struct Chat<'a> {
    db: &'a TestDb,
    graph: FakeGraph,
    pub(crate) app: TestApp,
    executor: FakeExecutor,
    /// How many messages to each person were read already.
    read: HashMap<String, usize>,
    next_id: usize,
}

impl<'a> Chat<'a> {
    pub(crate) async fn start(db: &'a TestDb, schedule: fn(u64) -> Fault) -> Self {
        let graph = FakeGraph::start().await;
        let executor = FakeExecutor::start(schedule).await;
        let mut config = sending_through(&db.config, &graph);
        let orders = config.executors.get_mut("orders").expect("the orders executor");
        orders.url = executor.url.clone();
        // One attempt: a failure is final at once, so that it can be retried.
        orders.max_attempts = Some(1);
        orders.request_timeout_ms = 2_000;
        let app = spawn_app_with(db, config).await;
        Self { db, graph, app, executor, read: HashMap::new(), next_id: 0 }
    }

    /// `from` writes `text`; returns the message id.
    pub(crate) async fn says(&mut self, from: &str, text: &str) -> String {
        self.next_id += 1;
        let id = format!("wamid.OOC{}", self.next_id);
        assert_eq!(Meta::new(&self.app, self.db).text(&id, from, text).await.status(), 200);
        id
    }

    /// The next message `to` reads.
    pub(crate) async fn reply(&mut self, to: &str) -> (String, Value) {
        let seen = self.read.get(to).copied().unwrap_or(0);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let mine: Vec<Value> =
                self.graph.requests().into_iter().map(|r| r.body).filter(|b| b["to"] == to).collect();
            if let Some(body) = mine.get(seen) {
                self.read.insert(to.to_owned(), seen + 1);
                return (text_of(body), body.clone());
            }
            assert!(std::time::Instant::now() < deadline, "no message {} for {to}", seen + 1);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `from` writes `text` and reads the answer.
    pub(crate) async fn ask(&mut self, from: &str, text: &str) -> String {
        self.says(from, text).await;
        self.reply(from).await.0
    }

    /// `from` asks for something that needs confirmation, confirms it, and reads what follows
    /// the confirmation (for a chat operation: its answer).
    async fn confirmed(&mut self, from: &str, text: &str) -> String {
        let prompt = self.ask(from, text).await;
        let code = code_in(&prompt);
        let thanks = self.ask(from, &format!("YES {code}")).await;
        assert!(thanks.starts_with("Thanks, confirmed"), "{thanks}");
        self.reply(from).await.0
    }

    pub(crate) async fn command_of(&self, message_id: &str) -> Uuid {
        crate::helpers::command_of_message(self.db, message_id).await
    }

    pub(crate) async fn settled(&self, id: Uuid) -> String {
        crate::helpers::settled(self.db, id).await
    }

    /// A customer's refund, confirmed and finished; its id and reference.
    async fn refund(&mut self, order: &str) -> (Uuid, String) {
        let asked = self.says(CUSTOMER, &format!("refund {order} 25.00")).await;
        let prompt = self.reply(CUSTOMER).await.0;
        let code = code_in(&prompt);
        let id = self.command_of(&asked).await;
        assert!(prompt.contains(ShortRef::of(id).as_str()), "the prompt names the command: {prompt}");
        self.ask(CUSTOMER, &format!("YES {code}")).await;
        self.settled(id).await;
        self.reply(CUSTOMER).await; // its outcome
        (id, ShortRef::of(id).to_string())
    }
}

pub(crate) fn code_in(prompt: &str) -> String {
    prompt.split("YES ").nth(1).and_then(|rest| rest.get(..6)).expect("a code in the prompt").to_owned()
}

async fn a_customer_asks_about_a_refused_a_confirmed_and_a_failed_command_and_sees_only_their_own(db: &TestDb) {
    let mut chat = Chat::start(db, |_| Fault::None).await;
    // Refused: the customer may not close accounts.
    let refused_message = chat.says(CUSTOMER, "close account 77").await;
    let refusal = chat.reply(CUSTOMER).await.0;
    assert!(refusal.contains("not allowed"), "{refusal}");
    let refused = chat.command_of(&refused_message).await;
    // Confirmed and executed.
    let (confirmed, confirmed_ref) = chat.refund("1234").await;
    // Failed: the executor does not know order 4413.
    let (failed, failed_ref) = chat.refund("4413").await;
    assert_eq!(chat.settled(failed).await, "failed");
    assert_eq!(chat.settled(confirmed).await, "executed");
    // Someone else's command.
    let other_message = chat.says(ADMIN, "order status 5").await;
    chat.reply(ADMIN).await;
    let other_ref = ShortRef::of(chat.command_of(&other_message).await).to_string();

    let list = chat.ask(CUSTOMER, "status").await;
    assert!(list.starts_with("Your requests:"), "{list}");
    let refused_ref = ShortRef::of(refused).to_string();
    for reference in [&refused_ref, &confirmed_ref, &failed_ref] {
        assert!(list.contains(reference.as_str()), "{reference} in {list}");
    }
    assert!(!list.contains(&other_ref) && !list.contains("order status"), "only their own: {list}");
    // Newest first.
    let at = |r: &str| list.find(r).unwrap_or(usize::MAX);
    assert!(at(&failed_ref) < at(&confirmed_ref) && at(&confirmed_ref) < at(&refused_ref), "{list}");

    let status = chat.ask(CUSTOMER, &format!("status {failed_ref}")).await;
    assert!(status.starts_with(&format!("{failed_ref} refund: failed since")), "{status}");
    assert!(status.contains("unknown order") && status.contains("ask again"), "{status}");
    // Typed loosely: lower case, `O` for `0`.
    let loose = failed_ref.to_lowercase().replace('0', "o");
    let again = chat.ask(CUSTOMER, &format!("status {loose}")).await;
    assert!(again.starts_with(&format!("{failed_ref} refund: failed")), "{again}");

    let why = chat.ask(CUSTOMER, &format!("why {failed_ref}")).await;
    assert!(why.starts_with(&format!("{failed_ref} refund: failed because unknown order")), "{why}");
    for step in ["confirmation asked", "answer: accepted", "allowed", "sent for execution", "failed: unknown order"] {
        assert!(why.contains(step), "{step} in {why}");
    }
    assert!(why.contains("Delivery to orders: failed (unknown order), 1 attempt(s)"), "{why}");
    let why = chat.ask(CUSTOMER, &format!("why {refused_ref}")).await;
    assert!(why.contains("refused: missing scope"), "{why}");
    let why = chat.ask(CUSTOMER, &format!("why {confirmed_ref}")).await;
    assert!(why.starts_with(&format!("{confirmed_ref} refund: executed.")) && why.contains("done"), "{why}");

    // Another person's command does not exist for this customer.
    let hidden = chat.ask(CUSTOMER, &format!("status {other_ref}")).await;
    assert!(hidden.contains(&format!("I found no request {other_ref}")), "{hidden}");
    let hidden = chat.ask(CUSTOMER, &format!("why {other_ref}")).await;
    assert!(hidden.contains("I found no request"), "{hidden}");
    // The asking itself went through the pipeline: read commands, executed by the gateway.
    let mut conn = db.raw().await;
    let rows = sqlx::query("SELECT state FROM commands WHERE intent_entity = 'request' AND actor_id = $1")
        .bind(CUSTOMER)
        .fetch_all(&mut conn)
        .await
        .expect("built-in commands");
    let states: Vec<String> = rows.iter().map(|r| sqlx::Row::try_get(r, 0).expect("state")).collect();
    // Six answered; the two about another person's command found nothing and say so.
    assert_eq!(states.iter().filter(|s| *s == "executed").count(), 6, "{states:?}");
    assert_eq!(states.iter().filter(|s| *s == "failed").count(), 2, "{states:?}");
    chat.app.stop().await.expect("stop");
}

async fn an_operator_lists_failures_and_retries_one_from_the_chat_which_executes_once(db: &TestDb) {
    let mut chat = Chat::start(db, first_call_fails).await;
    let (failed, failed_ref) = chat.refund("1234").await;
    assert_eq!(chat.settled(failed).await, "failed");

    let failures = chat.ask(ADMIN, "failures").await;
    assert!(failures.starts_with("Failed or stuck requests:"), "{failures}");
    assert!(failures.contains(&failed_ref) && failures.contains("*******0001"), "masked actor: {failures}");
    let status = chat.ask(ADMIN, &format!("status {failed_ref}")).await;
    assert!(status.contains(&format!("reply \"retry {failed_ref}\"")), "{status}");

    let done = chat.confirmed(ADMIN, &format!("retry {failed_ref}")).await;
    assert!(done.starts_with(&format!("Done: retry {failed_ref}. That is ")), "{done}");
    let retry_ref = done.split("That is ").nth(1).and_then(|r| r.get(..6)).expect("the retry's reference");
    // The retry is a recovery command naming the failed one; it executes, the original stays failed.
    let retry = db.store.commands().by_ref(&tenant("demo"), &ShortRef::parse(retry_ref).expect("ref")).await;
    let retry = retry.expect("read").into_iter().next().expect("the retry");
    assert_eq!(retry.envelope.target_command_id, Some(failed));
    assert_eq!(chat.settled(retry.envelope.command_id).await, "executed");
    assert_eq!(chat.settled(failed).await, "failed");
    // Once: the executor applied the refund's key one time, over both calls.
    let effects = chat.executor.effects();
    assert_eq!(effects.len(), 1, "{effects:?}");
    assert_eq!(effects.values().copied().collect::<Vec<_>>(), [1]);
    assert_eq!(chat.executor.calls(), 2);
    // Linked evidence, as the API's recovery leaves it.
    let evidence = db.store.evidence().for_command("demo", failed).await.expect("evidence");
    let link = evidence.iter().find(|a| a.kind == "recovery.requested").expect("recovery.requested on the target");
    assert_eq!(link.body["decision"]["recovery_command_id"], retry.envelope.command_id.to_string());
    chat.app.stop().await.expect("stop");
}

async fn recovery_in_the_wrong_state_is_refused_with_what_is_allowed_and_customers_cannot_recover(db: &TestDb) {
    let mut chat = Chat::start(db, |_| Fault::None).await;
    let (executed, executed_ref) = chat.refund("1234").await;
    assert_eq!(chat.settled(executed).await, "executed");
    // A customer may not recover anything: refused before any confirmation, with the reason.
    let refused = chat.ask(CUSTOMER, &format!("retry {executed_ref}")).await;
    assert!(refused.starts_with("Sorry, you are not allowed to retry. Ref "), "{refused}");
    // An executed command cannot be canceled: the operator is told what can be done instead, at
    // once, not asked to confirm something that cannot run.
    let asked = chat.says(ADMIN, &format!("cancel {executed_ref}")).await;
    let answer = chat.reply(ADMIN).await.0;
    assert!(
        answer.starts_with(&format!("I couldn't cancel {executed_ref}: not while it is executed. What can be done: 1. compensate {executed_ref}.")),
        "{answer}"
    );
    let cancel = chat.command_of(&asked).await;
    assert_eq!(chat.settled(cancel).await, "rejected");
    let evidence = db.store.evidence().for_command("demo", cancel).await.expect("evidence");
    assert!(evidence.iter().all(|a| a.kind != "command.confirmation.requested"), "no prompt");
    let rejected = evidence.iter().find(|a| a.kind == "execution.rejected").expect("the refusal");
    assert_eq!(rejected.body["decision"]["error"]["allowed"], json!(["compensate"]));
    assert_eq!(chat.settled(executed).await, "executed", "untouched");
    // A reference that names nothing the operator may see is refused at once too.
    let unknown = chat.ask(ADMIN, "retry ZZZZZZ").await;
    assert!(unknown.starts_with("I found no request ZZZZZZ that you can see."), "{unknown}");
    // The state is checked again when the action runs: the customer declines their refund after
    // the operator was asked to confirm canceling it, so the confirmed cancel finds it canceled.
    let waiting = chat.says(CUSTOMER, "refund 4321 25.00").await;
    let customer_prompt = chat.reply(CUSTOMER).await.0;
    let waiting_ref = ShortRef::of(chat.command_of(&waiting).await).to_string();
    let operator_prompt = chat.ask(ADMIN, &format!("cancel {waiting_ref}")).await;
    assert!(operator_prompt.contains("YES "), "{operator_prompt}");
    chat.ask(CUSTOMER, &format!("NO {}", code_in(&customer_prompt))).await;
    chat.ask(ADMIN, &format!("YES {}", code_in(&operator_prompt))).await;
    let late = chat.reply(ADMIN).await.0;
    assert!(
        late.starts_with(&format!(
            "I couldn't cancel {waiting_ref}: not while it is canceled. What can be done: 1. reprocess {waiting_ref}."
        )),
        "{late}"
    );
    // Pausing and resuming an agent from the chat.
    let paused = chat.confirmed(ADMIN, "pause orders").await;
    assert_eq!(paused, "orders is paused now.");
    let agents = chat.ask(ADMIN, "agents").await;
    assert!(agents.contains("• orders: paused"), "{agents}");
    let resumed = chat.confirmed(ADMIN, "resume orders").await;
    assert_eq!(resumed, "orders is idle now.");
    // Resuming an agent that is not paused is refused by the agent machine.
    // Resuming an agent that is not paused, or one that does not exist, is refused at once.
    let twice = chat.ask(ADMIN, "resume gateway").await;
    assert!(twice.starts_with("I couldn't resume: not while it is idle."), "{twice}");
    let nobody = chat.ask(ADMIN, "pause nobody").await;
    assert!(nobody.starts_with("There is no agent nobody."), "{nobody}");

    chat.app.stop().await.expect("stop");
}

async fn compensate_from_the_chat_ends_with_the_original_compensated(db: &TestDb) {
    let mut chat = Chat::start(db, |_| Fault::None).await;
    let (refund, refund_ref) = chat.refund("1234").await;
    assert_eq!(chat.settled(refund).await, "executed");
    // The compensation is high risk: after the confirmation the operator proves who they are.
    let asked = chat.says(ADMIN, &format!("compensate {refund_ref}")).await;
    let prompt = chat.reply(ADMIN).await.0;
    assert!(prompt.contains("verify it's you"), "{prompt}");
    let code = code_in(&prompt);
    let link = chat.ask(ADMIN, &format!("YES {code}")).await;
    assert!(link.contains("/step-up?command="), "{link}");
    let compensate = chat.command_of(&asked).await;
    let settings = chatgate::service::Settings::with_shipped_registry(db.config.clone()).expect("settings");
    let key = db
        .store
        .commands()
        .get(&tenant("demo"), compensate)
        .await
        .expect("read")
        .expect("command")
        .envelope
        .idempotency_key;
    let now = time::OffsetDateTime::now_utc();
    let proof = settings.security.stepup.mint(ADMIN, compensate, key.as_str(), now).expect("mint");
    let operator = api_token(db, "demo", "ops-1", "stepup:verify");
    let response = chat
        .app
        .client
        .post(chat.app.url(&format!("/v1/commands/{compensate}/step-up")))
        .bearer_auth(operator)
        .json(&json!({"token": proof}))
        .send()
        .await
        .expect("step-up");
    assert_eq!(response.status(), StatusCode::OK);
    let thanks = chat.reply(ADMIN).await.0;
    assert!(thanks.starts_with("Thanks, confirmed: compensate."), "{thanks}");
    let done = chat.reply(ADMIN).await.0;
    assert!(done.starts_with(&format!("Done: compensate {refund_ref}.")), "{done}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let state =
            db.store.commands().get(&tenant("demo"), refund).await.expect("read").expect("command").lifecycle.state;
        if state.as_str() == "compensated" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {state}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    chat.app.stop().await.expect("stop");
}

/// One recovery attempt's outcome, whichever way it was asked: allowed (and the target's state
/// after it), or refused with the actions allowed instead.
#[derive(Debug, PartialEq)]
enum Outcome {
    Done { target_state: String },
    Refused { allowed: Vec<String> },
}

async fn the_api_and_the_chat_recover_through_the_same_code_with_the_same_outcomes(db: &TestDb) {
    let mut chat = Chat::start(db, |_| Fault::None).await;
    let token = api_token(db, "demo", "ops-1", "recovery:write");
    // Pairs of commands in the same states: one for the API, one for the chat.
    let mut pairs: Vec<(&str, Uuid, Uuid)> = vec![];
    for state in ["executed", "failed", "waiting"] {
        let mut pair = vec![];
        for n in 0..2 {
            let order = match state {
                "executed" => format!("50{n}"),
                "failed" => format!("6{n}13"),
                _ => format!("70{n}"),
            };
            if state == "waiting" {
                let asked = chat.says(CUSTOMER, &format!("refund {order} 25.00")).await;
                chat.reply(CUSTOMER).await;
                pair.push(chat.command_of(&asked).await);
            } else {
                pair.push(chat.refund(&order).await.0);
            }
        }
        pairs.push((state, pair[0], pair[1]));
    }
    let mut seen = vec![];
    for action in ["cancel", "retry"] {
        for (state, by_api, by_chat) in &pairs {
            let response = chat
                .app
                .client
                .post(chat.app.url(&format!("/v1/commands/{by_api}/recovery")))
                .bearer_auth(&token)
                .json(&json!({"action": action, "reason": "equivalence"}))
                .send()
                .await
                .expect("recovery");
            let status = response.status();
            let body: Value = response.json().await.expect("json");
            let api = if status == StatusCode::CREATED {
                Outcome::Done { target_state: body["target_state"].as_str().unwrap_or_default().to_owned() }
            } else {
                assert_eq!(status, StatusCode::CONFLICT, "{body}");
                let allowed = body["allowed"].as_array().cloned().unwrap_or_default();
                Outcome::Refused { allowed: allowed.iter().filter_map(|a| a.as_str().map(str::to_owned)).collect() }
            };
            let reference = ShortRef::of(*by_chat);
            let asked = chat.says(ADMIN, &format!("{action} {reference}")).await;
            let first = chat.reply(ADMIN).await.0;
            // What would be refused is refused before the prompt; what may run is confirmed.
            let prompted = first.contains("YES ");
            assert_eq!(prompted, matches!(api, Outcome::Done { .. }), "{action} on a {state} command: {first}");
            if prompted {
                chat.ask(ADMIN, &format!("YES {}", code_in(&first))).await;
                chat.reply(ADMIN).await;
            }
            let id = chat.command_of(&asked).await;
            chat.settled(id).await;
            let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
            let ended = evidence.iter().rfind(|a| a.kind.starts_with("execution.")).expect("an outcome");
            let by_chat_outcome = if ended.kind == "execution.executed" {
                let result = &ended.body["decision"]["result"];
                Outcome::Done { target_state: result["target_state"].as_str().unwrap_or_default().to_owned() }
            } else {
                let allowed = ended.body["decision"]["error"]["allowed"].as_array().cloned().unwrap_or_default();
                Outcome::Refused { allowed: allowed.iter().filter_map(|a| a.as_str().map(str::to_owned)).collect() }
            };
            assert_eq!(api, by_chat_outcome, "{action} on a {state} command");
            seen.push(api);
        }
    }
    // Both kinds of outcome were compared, refusals with something allowed instead.
    assert!(seen.iter().any(|o| matches!(o, Outcome::Done { .. })), "{seen:?}");
    assert!(seen.iter().any(|o| matches!(o, Outcome::Refused { allowed } if !allowed.is_empty())), "{seen:?}");
    chat.app.stop().await.expect("stop");
}

async fn long_lists_continue_with_more_and_operators_read_trace_and_evidence(db: &TestDb) {
    let mut chat = Chat::start(db, |_| Fault::None).await;
    let mut refs = vec![];
    for n in 0..6 {
        let asked = chat.says(CUSTOMER, &format!("order status 80{n}")).await;
        chat.reply(CUSTOMER).await;
        refs.push(ShortRef::of(chat.command_of(&asked).await).to_string());
    }
    let first = chat.ask(CUSTOMER, "status").await;
    assert!(first.contains("Reply \"more\" for older ones."), "{first}");
    assert_eq!(refs.iter().filter(|r| first.contains(r.as_str())).count(), 5, "{first}");
    assert!(!first.contains(&refs[0]), "the oldest is on the next page: {first}");
    let second = chat.ask(CUSTOMER, "more").await;
    assert!(second.starts_with("Your requests (page 2):") && second.contains(&refs[0]), "{second}");
    assert!(!second.contains("more\" for older"), "{second}");
    let third = chat.ask(CUSTOMER, "more").await;
    assert_eq!(third, "That was all.");

    // The operator's views of one of them: its timeline and its evidence, masked.
    let trace = chat.ask(ADMIN, &format!("trace {}", refs[5])).await;
    assert!(trace.starts_with(&format!("{} order status: 1 command(s), 1 message(s)", refs[5])), "{trace}");
    assert!(trace.contains("→ executed") && trace.contains("delivery to orders"), "{trace}");
    let evidence = chat.ask(ADMIN, &format!("evidence {}", refs[5])).await;
    assert!(
        evidence.contains("evidence artifact(s), hash-chained") && evidence.contains("execution.executed"),
        "{evidence}"
    );
    assert!(!evidence.contains(CUSTOMER), "no phone numbers: {evidence}");
    // A customer cannot ask for these.
    let refused = chat.ask(CUSTOMER, &format!("trace {}", refs[5])).await;
    assert!(refused.starts_with("Sorry, you are not allowed to trace. Ref "), "{refused}");
    chat.app.stop().await.expect("stop");
}

async fn references_resolve_through_the_api_and_older_commands_get_theirs(db: &TestDb) {
    let mut chat = Chat::start(db, |_| Fault::None).await;
    let asked = chat.says(CUSTOMER, "order status 901").await;
    chat.reply(CUSTOMER).await;
    let id = chat.command_of(&asked).await;
    let reference = ShortRef::of(id);
    let token = api_token(db, "demo", "ops-1", "commands:read");
    let list = |query: String| {
        let request = chat.app.client.get(chat.app.url(&format!("/v1/commands?{query}"))).bearer_auth(&token);
        async move { request.send().await.expect("list") }
    };
    // Typed the loose way a person would.
    let found: Value = list(format!("ref={}", reference.as_str().to_lowercase())).await.json().await.expect("json");
    let commands = found["commands"].as_array().cloned().unwrap_or_default();
    assert_eq!(commands.len(), 1, "{found}");
    assert_eq!(
        (commands[0]["command_id"].as_str(), commands[0]["ref"].as_str()),
        (Some(id.to_string().as_str()), Some(reference.as_str()))
    );
    let none: Value = list("ref=not-a-ref".into()).await.json().await.expect("json");
    assert_eq!(none["commands"], json!([]), "text that cannot be a reference matches nothing");

    // A command written before references existed gets its own when the store migrates.
    let mut conn = db.raw().await;
    sqlx::query("UPDATE commands SET short_ref = NULL").execute(&mut conn).await.expect("forget the references");
    db.store.migrate().await.expect("migrate again");
    let again = db.store.commands().by_ref(&tenant("demo"), &reference).await.expect("read");
    assert_eq!(again.iter().map(|c| c.envelope.command_id).collect::<Vec<_>>(), [id]);
    chat.app.stop().await.expect("stop");
}

async fn an_agent_move_is_checked_again_when_it_runs(db: &TestDb) {
    let mut chat = Chat::start(db, |_| Fault::None).await;
    // Paused through the API between the prompt and the confirmation: the chat's pause finds it
    // paused.
    let prompt = chat.ask(ADMIN, "pause orders").await;
    assert!(prompt.contains("YES "), "{prompt}");
    let token = api_token(db, "demo", "ops-1", "agents:admin");
    let paused = chat.app.client.post(chat.app.url("/v1/agents/orders/pause")).bearer_auth(&token).send().await;
    assert_eq!(paused.expect("pause").status(), StatusCode::OK);
    chat.ask(ADMIN, &format!("YES {}", code_in(&prompt))).await;
    let late = chat.reply(ADMIN).await.0;
    assert!(late.starts_with("I couldn't pause: not while it is paused."), "{late}");
    // Resumed through the API: once the 5-second dedupe window of agent moves is over, the same
    // words are a new request (within it they would be the first one's outcome again).
    let resumed = chat.app.client.post(chat.app.url("/v1/agents/orders/resume")).bearer_auth(&token).send().await;
    assert_eq!(resumed.expect("resume").status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let fresh = chat.ask(ADMIN, "pause orders").await;
    assert!(fresh.contains("YES "), "a new request, asking for confirmation: {fresh}");
    chat.app.stop().await.expect("stop");
}
