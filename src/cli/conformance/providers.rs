//! The other providers' deliveries, signed as each signs: Twilio's Messaging webhook (a form,
//! HMAC-SHA1 over the public URL and the sorted parameters) and a Standard Webhooks sender
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature`).

use crate::cli::conformance::rig::{PUBLIC_BASE, Rig, person};
use crate::cli::conformance::scenario::{Chat, Repeat, Standard};
use crate::cli::conformance::steps::{Answered, send_repeated};

/// The shipped configuration's Twilio WhatsApp sender.
const TWILIO_NUMBER: &str = "whatsapp:+14155238886";

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
    let signature =
        crate::channels::twilio::signature::expected(&token, &format!("{PUBLIC_BASE}/webhooks/twilio"), &form);
    let body = serde_urlencoded::to_string(&form).map_err(|e| e.to_string())?;
    let request = || {
        rig.client
            .post(rig.url("/webhooks/twilio"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-twilio-signature", signature.clone())
            .body(body.clone())
    };
    send_repeated(request, repeat).await
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
    let request = || {
        let request = rig.client.post(rig.url(&path)).header("content-type", "application/json").body(body.clone());
        headers.iter().fold(request, |request, (name, value)| request.header(*name, value))
    };
    send_repeated(request, repeat).await
}
