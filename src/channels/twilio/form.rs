//! A Twilio Messaging webhook's form (`MessageSid`, `AccountSid`, `From`, `To`, `Body`,
//! `NumMedia`, `ProfileName`, `WaId`, `ButtonPayload`, ...) read as an [`InboundMessage`]. Pure.
//!
//! One adapter serves WhatsApp (`From=whatsapp:+15550000001`) and SMS (`From=+15550000001`):
//! routing uses the business number without its `whatsapp:` prefix, the sender is known by
//! their digits (`WaId` when Twilio sends it) as on Meta's side, and replies go between the
//! addresses exactly as Twilio wrote them.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::channels::body;
use crate::domain::command::Channel;

use crate::domain::command::ExternalId;
use crate::domain::message::Addresses;
use crate::domain::message::Content;
use crate::domain::message::DeliveryStatus;
use crate::domain::message::InboundMessage;
use crate::domain::message::StatusUpdate;

/// The channel of every Twilio message (WhatsApp or SMS): its dedupe namespace and templates.
pub const CHANNEL: &str = "twilio";

const WHATSAPP_PREFIX: &str = "whatsapp:";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    #[error("a Twilio message needs `{0}`")]
    Missing(&'static str),
    #[error("`{0}` is not valid: {1}")]
    Invalid(&'static str, String),
    #[error("not a Twilio form: {0}")]
    Malformed(String),
}

/// The message webhook's form as `read` reads it (and the OpenAPI document describes it): the
/// fields it needs and the ones it reads when present. Twilio sends more, which are kept (the
/// form is stored whole) and ignored. A blank field counts as absent.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = TwilioMessage)]
#[serde(rename_all = "PascalCase")]
pub struct MessageForm {
    /// The message's id (`SmsMessageSid` in older forms).
    pub message_sid: Option<String>,
    pub sms_message_sid: Option<String>,
    #[schema(required = true)]
    pub account_sid: Option<String>,
    /// The person: `whatsapp:+15550000001`, or `+15550000001` over SMS.
    #[schema(required = true)]
    pub from: Option<String>,
    /// The business number, with the same prefix.
    #[schema(required = true)]
    pub to: Option<String>,
    pub body: Option<String>,
    /// How many media files it holds (`MediaContentType0`, `MediaUrl0`, ...), as digits.
    #[schema(pattern = "^[0-9]+$")]
    pub num_media: Option<String>,
    pub media_content_type0: Option<String>,
    pub profile_name: Option<String>,
    /// The WhatsApp sender's digits.
    pub wa_id: Option<String>,
    /// A quick reply's id (a confirmation's button) and its title.
    pub button_payload: Option<String>,
    pub button_text: Option<String>,
    /// A shared location.
    pub latitude: Option<String>,
    pub original_replied_message_sid: Option<String>,
}

/// The status callback's form (the status of a message this gateway sent).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = TwilioStatus)]
#[serde(rename_all = "PascalCase")]
pub struct StatusForm {
    /// The message's id (`SmsSid` in older forms).
    pub message_sid: Option<String>,
    pub sms_sid: Option<String>,
    /// `queued`, `sent`, `delivered`, `read`, `undelivered`, `failed`, ... (`SmsStatus` in older forms).
    pub message_status: Option<String>,
    pub sms_status: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub to: Option<String>,
    pub account_sid: Option<String>,
}

/// Reads the form of a webhook; `hold` is how long replies wait for its TwiML answer.
pub fn parse(params: &[(String, String)], hold: Duration) -> Result<InboundMessage, FormError> {
    read(&body::form(params), Some(hold))
}

/// A field's text, trimmed; blank is absent.
fn present(field: &Option<String>) -> Option<&str> {
    field.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// Reads a form (see [`to_raw`]); a stored one is read again with no answer waiting (`None`).
pub fn read(raw: &Value, hold: Option<Duration>) -> Result<InboundMessage, FormError> {
    let form: MessageForm = body::envelope(raw).map_err(FormError::Malformed)?;
    let required = |field, name| present(field).ok_or(FormError::Missing(name));
    let sid = present(&form.message_sid).or(present(&form.sms_message_sid)).ok_or(FormError::Missing("MessageSid"))?;
    required(&form.account_sid, "AccountSid")?;
    let (from, to) = (required(&form.from, "From")?, required(&form.to, "To")?);
    let person = present(&form.wa_id).map_or_else(|| bare(from).trim_start_matches('+').to_owned(), str::to_owned);
    let media: u32 = match present(&form.num_media) {
        Some(n) => n.parse().map_err(|_| FormError::Invalid("NumMedia", n.to_owned()))?,
        None => 0,
    };
    let body = present(&form.body);
    let content = if let Some(payload) = present(&form.button_payload) {
        Content::Reply { id: payload.to_owned(), title: present(&form.button_text).unwrap_or(payload).to_owned() }
    } else if media > 0 {
        let kind = present(&form.media_content_type0).and_then(|t| t.split('/').next()).unwrap_or("media");
        Content::Media { kind: kind.to_owned(), caption: body.map(str::to_owned) }
    } else if present(&form.latitude).is_some() {
        Content::Location
    } else if let Some(text) = body {
        Content::Text(text.to_owned())
    } else {
        Content::Unsupported { kind: "empty".into() }
    };
    Ok(InboundMessage {
        channel: Channel::parse(CHANNEL).map_err(|e| FormError::Invalid("channel", e.to_string()))?,
        provider_message_id: ExternalId::parse(sid).map_err(|e| FormError::Invalid("MessageSid", e.to_string()))?,
        to: bare(to).to_owned(),
        from: person,
        sender_name: present(&form.profile_name).map(str::to_owned),
        sent_at: None,
        content,
        in_reply_to: present(&form.original_replied_message_sid).map(str::to_owned),
        raw: raw.clone(),
        addresses: Some(Addresses { business: to.to_owned(), person: from.to_owned(), conversation: None }),
        answered_inline: hold,
    })
}

/// Reads a status callback (`MessageSid`, `MessageStatus`, `ErrorCode`, `ErrorMessage`, `To`)
/// about a message we sent. Twilio's statuses are mapped onto the delivery record's (WhatsApp's)
/// names: `undelivered` is `failed`; those before `sent` (`accepted`, `queued`, `sending`, ...)
/// are kept as Twilio wrote them and not tracked.
pub fn status(params: &[(String, String)]) -> Result<StatusUpdate, FormError> {
    let form: StatusForm = body::envelope(&body::form(params)).map_err(FormError::Malformed)?;
    let sid = present(&form.message_sid).or(present(&form.sms_sid)).ok_or(FormError::Missing("MessageSid"))?;
    let status =
        present(&form.message_status).or(present(&form.sms_status)).ok_or(FormError::Missing("MessageStatus"))?;
    // Twilio's `undelivered` is a failure; `accepted`, `scheduled`, `queued` and `sending` come
    // before it left, which is not tracked.
    let tracked = match status {
        "undelivered" => Some(DeliveryStatus::Failed),
        other => DeliveryStatus::parse(other),
    };
    let errors = present(&form.error_code).map(|code| {
        let code = code.parse::<i64>().map_or_else(|_| Value::String(code.to_owned()), Value::from);
        serde_json::json!([{"code": code, "message": present(&form.error_message)}])
    });
    Ok(StatusUpdate {
        channel: Channel::parse(CHANNEL).map_err(|e| FormError::Invalid("channel", e.to_string()))?,
        provider_message_id: sid.to_owned(),
        status: tracked,
        reported: status.to_owned(),
        recipient: present(&form.to).map(str::to_owned),
        errors,
    })
}

fn bare(address: &str) -> &str {
    address.strip_prefix(WHATSAPP_PREFIX).unwrap_or(address)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_callbacks_are_read_with_twilios_statuses_mapped() {
        let delivered = status(&form(&[
            ("MessageSid", "SMOUT1"),
            ("MessageStatus", "delivered"),
            ("To", "whatsapp:+15550000001"),
            ("AccountSid", "AC1"),
        ]))
        .unwrap();
        assert_eq!(delivered.provider_message_id, "SMOUT1");
        assert_eq!(delivered.status, Some(DeliveryStatus::Delivered));
        assert_eq!((delivered.recipient.as_deref(), delivered.errors), (Some("whatsapp:+15550000001"), None));
        let failed = status(&form(&[
            ("SmsSid", "SMOUT2"),
            ("SmsStatus", "undelivered"),
            ("ErrorCode", "63016"),
            ("ErrorMessage", "outside the 24-hour window"),
        ]))
        .unwrap();
        assert_eq!((failed.status, failed.reported.as_str()), (Some(DeliveryStatus::Failed), "undelivered"));
        let queued = status(&form(&[("MessageSid", "SM3"), ("MessageStatus", "queued")])).unwrap();
        assert_eq!(queued.status, None, "not left yet: not tracked");
        assert_eq!(failed.errors, Some(serde_json::json!([{"code": 63016, "message": "outside the 24-hour window"}])));
        assert_eq!(status(&form(&[("MessageStatus", "sent")])), Err(FormError::Missing("MessageSid")));
        assert_eq!(status(&form(&[("MessageSid", "SM1")])), Err(FormError::Missing("MessageStatus")));
    }

    fn form(raw: &[(&str, &str)]) -> Vec<(String, String)> {
        raw.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    const HOLD: Duration = Duration::from_secs(5);

    #[test]
    fn a_whatsapp_text_routes_by_the_bare_numbers_and_answers_between_twilios_addresses() {
        let message = parse(
            &form(&[
                ("MessageSid", "SM0123456789abcdef0123456789abcdef"),
                ("AccountSid", "AC0123456789abcdef0123456789abcdef"),
                ("From", "whatsapp:+15550000001"),
                ("To", "whatsapp:+14155238886"),
                ("Body", "refund 1234 25.00"),
                ("NumMedia", "0"),
                ("ProfileName", "Ana"),
                ("WaId", "15550000001"),
            ]),
            HOLD,
        )
        .unwrap();
        assert_eq!((message.to.as_str(), message.from.as_str()), ("+14155238886", "15550000001"));
        assert_eq!(message.content, Content::Text("refund 1234 25.00".into()));
        assert_eq!(message.sender_name.as_deref(), Some("Ana"));
        let addresses = message.addresses.unwrap();
        assert_eq!(
            (addresses.business.as_str(), addresses.person.as_str()),
            ("whatsapp:+14155238886", "whatsapp:+15550000001")
        );
        assert_eq!(message.raw["Body"], "refund 1234 25.00");
    }

    #[test]
    fn an_sms_sender_is_known_by_their_digits() {
        let message = parse(
            &form(&[
                ("MessageSid", "SM1"),
                ("AccountSid", "AC1"),
                ("From", "+15550000001"),
                ("To", "+14155238886"),
                ("Body", "help"),
            ]),
            HOLD,
        )
        .unwrap();
        assert_eq!((message.to.as_str(), message.from.as_str()), ("+14155238886", "15550000001"));
        assert_eq!(message.addresses.unwrap().person, "+15550000001");
    }

    #[test]
    fn button_payloads_media_and_empty_bodies_are_read() {
        let base = [("MessageSid", "SM1"), ("AccountSid", "AC1"), ("From", "+1555"), ("To", "+1415")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            parse(&form(&all), HOLD).unwrap().content
        };
        assert_eq!(
            with(&[("Body", "Yes"), ("ButtonPayload", "cg:yes:n1"), ("ButtonText", "Yes")]),
            Content::Reply { id: "cg:yes:n1".into(), title: "Yes".into() }
        );
        assert_eq!(
            with(&[("NumMedia", "1"), ("MediaContentType0", "image/jpeg"), ("Body", "receipt")]),
            Content::Media { kind: "image".into(), caption: Some("receipt".into()) }
        );
        assert_eq!(with(&[("Body", "")]), Content::Unsupported { kind: "empty".into() });
    }

    #[test]
    fn a_form_without_its_ids_or_with_a_bad_count_is_refused() {
        assert_eq!(
            parse(&form(&[("AccountSid", "AC1"), ("From", "+1"), ("To", "+2")]), HOLD),
            Err(FormError::Missing("MessageSid"))
        );
        assert_eq!(
            parse(&form(&[("MessageSid", "SM1"), ("From", "+1"), ("To", "+2")]), HOLD),
            Err(FormError::Missing("AccountSid"))
        );
        assert_eq!(
            parse(&form(&[("MessageSid", "SM1"), ("AccountSid", "AC1"), ("To", "+2")]), HOLD),
            Err(FormError::Missing("From"))
        );
        let bad =
            form(&[("MessageSid", "SM1"), ("AccountSid", "AC1"), ("From", "+1"), ("To", "+2"), ("NumMedia", "x")]);
        assert!(matches!(parse(&bad, HOLD), Err(FormError::Invalid("NumMedia", _))));
    }
}
