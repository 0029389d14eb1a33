//! The providers' deliveries, signed as each signs: Meta's WhatsApp webhook
//! (`X-Hub-Signature-256` over the body), Twilio's Messaging webhook (a form, `X-Twilio-Signature`
//! over the public URL and the sorted parameters) and a Standard Webhooks sender (`webhook-id`,
//! `webhook-timestamp`, `webhook-signature`).

use crate::cli::conformance::rig::{BUSINESS_NUMBER, PUBLIC_BASE, Rig, person};
use crate::cli::conformance::scenario::{Chat, Repeat, Standard};
use crate::cli::conformance::steps::{Answered, send_repeated};

/// The shipped configuration's Twilio WhatsApp sender.
const TWILIO_NUMBER: &str = "whatsapp:+14155238886";

pub async fn whatsapp(rig: &Rig, chat: &Chat, repeat: Repeat) -> Result<Answered, String> {
    use crate::channels::whatsapp::{signature, simulate};
    let message = simulate::text(&chat.id, person(&chat.from), &chat.text);
    let body = simulate::notification(BUSINESS_NUMBER, vec![message], vec![]).to_string().into_bytes();
    let app = rig.settings.config.whatsapp.apps.get("default").ok_or("no WhatsApp app `default`")?;
    let headers = [("x-hub-signature-256", signature::sign(app.app_secret.expose().as_bytes(), &body))];
    post_signed(rig, "/webhooks/whatsapp", "application/json", &headers, body, repeat).await
}

pub async fn twilio(rig: &Rig, chat: &Chat, repeat: Repeat) -> Result<Answered, String> {
    let from = person(&chat.from);
    let form: Vec<(String, String)> = [
        ("MessageSid", chat.id.as_str()),
        ("AccountSid", "ACconformance00000000000000000000"),
        ("From", &format!("whatsapp:+{from}")),
        ("To", TWILIO_NUMBER),
        ("Body", chat.text.as_str()),
        ("NumMedia", "0"),
        ("WaId", from),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let token = rig.settings.config.twilio.auth_token.expose().as_bytes().to_owned();
    let url = format!("{PUBLIC_BASE}/webhooks/twilio");
    let headers = [("x-twilio-signature", crate::channels::twilio::signature::expected(&token, &url, &form))];
    let body = serde_urlencoded::to_string(&form).map_err(|e| e.to_string())?.into_bytes();
    post_signed(rig, "/webhooks/twilio", "application/x-www-form-urlencoded", &headers, body, repeat).await
}

pub async fn standard(rig: &Rig, delivery: &Standard, repeat: Repeat) -> Result<Answered, String> {
    let source = rig.settings.config.standard_webhooks.get(&delivery.source);
    let source = source.ok_or_else(|| format!("no Standard Webhooks source `{}`", delivery.source))?;
    let secret = source.secrets.first().ok_or("the source has no secret")?;
    let key = crate::domain::standard_webhooks::key(secret.expose())?;
    let body = delivery.body.to_string().into_bytes();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let headers = crate::domain::standard_webhooks::headers(Some(&key), &delivery.id, now, &body);
    let path = format!("/webhooks/standard/{}", delivery.source);
    post_signed(rig, &path, "application/json", &headers, body, repeat).await
}

/// The same signed delivery, sent as `repeat` says.
async fn post_signed(
    rig: &Rig,
    path: &str,
    content_type: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
    repeat: Repeat,
) -> Result<Answered, String> {
    let request = || {
        let request = rig.client.post(rig.url(path)).header("content-type", content_type).body(body.clone());
        headers.iter().fold(request, |request, (name, value)| request.header(*name, value))
    };
    send_repeated(request, repeat).await
}
