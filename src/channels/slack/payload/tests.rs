//! Bodies shaped as Slack documents them: the Events API's `url_verification` and
//! `event_callback` envelope with a `message.im` event (docs.slack.dev/apis/events-api,
//! reference/events/message), the slash command form of slack_sdk's signature test
//! (slackapi/python-slack-sdk tests/slack_sdk/signature/test_signature_verifier.py, commit
//! 0756c47), and a `block_actions` payload (docs.slack.dev/reference/interaction-payloads).

use serde_json::json;

use super::*;

fn message_event() -> Value {
    json!({
        "token": "XXYYZZ", "team_id": "T0DEMO", "api_app_id": "A0APP",
        "event": {"type": "message", "channel": "D0DM", "user": "U0ANA", "text": "refund 1234 25.00",
                  "ts": "1355517523.000005", "event_ts": "1355517523.000005", "channel_type": "im"},
        "type": "event_callback", "event_id": "Ev0PV52K21", "event_time": 1355517523,
    })
}

fn tap() -> Value {
    json!({
        "type": "block_actions",
        "team": {"id": "T0DEMO", "domain": "demo"},
        "user": {"id": "U0ANA", "username": "ana", "team_id": "T0DEMO"},
        "api_app_id": "A0APP", "trigger_id": "12466734323.1395872398",
        "container": {"type": "message", "message_ts": "1548261231.000200", "channel_id": "D0DM", "is_ephemeral": false,
                      "thread_ts": "1355517523.000005"},
        "channel": {"id": "D0DM", "name": "directmessage"},
        "actions": [{"action_id": "cg:yes:n", "block_id": "confirm", "text": {"type": "plain_text", "text": "Yes"},
                     "value": "cg:yes:n", "type": "button", "action_ts": "1548426417.840180"}],
    })
}

#[test]
fn a_message_event_is_read_with_its_team_user_channel_and_thread() {
    let Ok(Event::Callback(Some(message))) = event(message_event().to_string().as_bytes()) else { panic!("a message") };
    assert_eq!(message.provider_message_id.as_str(), "Ev0PV52K21", "a retry repeats the event_id");
    assert_eq!((message.to.as_str(), message.from.as_str()), ("T0DEMO", "slack:U0ANA"));
    assert_eq!(message.content, Content::Text("refund 1234 25.00".into()));
    let addresses = message.addresses.expect("addresses");
    assert_eq!((addresses.person.as_str(), addresses.conversation.as_deref()), ("D0DM", Some("1355517523.000005")));
    assert_eq!(read(&message.raw).map(|m| m.provider_message_id), Some(message.provider_message_id));
}

#[test]
fn the_bots_own_messages_edits_and_the_handshake_carry_nothing_to_act_on() {
    let mut own = message_event();
    own["event"]["bot_id"] = json!("B0BOT");
    assert_eq!(event(own.to_string().as_bytes()), Ok(Event::Callback(None)));
    let mut edit = message_event();
    edit["event"]["subtype"] = json!("message_changed");
    assert_eq!(event(edit.to_string().as_bytes()), Ok(Event::Callback(None)));
    let check = json!({"token": "X", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"});
    assert_eq!(
        event(check.to_string().as_bytes()),
        Ok(Event::UrlVerification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into()))
    );
    let mut mention = message_event();
    mention["event"]["type"] = json!("app_mention");
    mention["event"]["text"] = json!("<@U0BOT> refund 1234 25.00");
    let Ok(Event::Callback(Some(m))) = event(mention.to_string().as_bytes()) else { panic!("a mention") };
    assert_eq!(m.content, Content::Text("refund 1234 25.00".into()));
}

#[test]
fn a_slash_command_reads_as_the_request_it_names() {
    let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    let params: Vec<(String, String)> = form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    let message = command(&params).expect("a command");
    assert_eq!(message.content, Content::Text("webhook-collect".into()));
    assert_eq!((message.to.as_str(), message.from.as_str()), ("T1DC2JH3J", "slack:U2CERLKJA"));
    assert_eq!(
        message.provider_message_id.as_str(),
        "command:398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    );
    let own: Vec<(String, String)> = [
        ("command", "/chatgate"),
        ("text", " refund 1234 25.00 "),
        ("team_id", "T"),
        ("user_id", "U"),
        ("channel_id", "C"),
        ("trigger_id", "1.2"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    assert_eq!(command(&own).expect("a command").content, Content::Text("refund 1234 25.00".into()));
    assert!(command(&own[..2]).is_err(), "no trigger_id: not a slash command");
}

#[test]
fn a_button_tap_is_a_reply_with_the_buttons_value_in_its_thread() {
    let params = vec![("payload".to_owned(), tap().to_string())];
    let message = interaction(&params).expect("read").expect("a tap");
    assert_eq!(message.content, Content::Reply { id: "cg:yes:n".into(), title: "Yes".into() });
    assert_eq!(message.provider_message_id.as_str(), "action:12466734323.1395872398");
    assert_eq!(message.addresses.and_then(|a| a.conversation).as_deref(), Some("1355517523.000005"));
    let submission = vec![("payload".to_owned(), json!({"type": "view_submission"}).to_string())];
    assert_eq!(interaction(&submission), Ok(None));
    assert!(interaction(&[("payload".to_owned(), "{".to_owned())]).is_err());
    assert!(interaction(&[]).is_err());
}

#[test]
fn what_is_not_a_slack_body_is_refused() {
    assert!(matches!(event(b"{"), Err(PayloadError::NotJson(_))));
    assert!(matches!(event(br#"{"type": "event_callback"}"#), Err(PayloadError::Unexpected(_))));
    assert!(matches!(event(b"[]"), Err(PayloadError::Unexpected(_))));
    let held_back =
        json!({"token": "X", "type": "app_rate_limited", "team_id": "T0DEMO", "minute_rate_limited": 1518467820});
    assert_eq!(event(held_back.to_string().as_bytes()), Ok(Event::Callback(None)), "acknowledged, nothing stored");
}
