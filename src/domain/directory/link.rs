//! Linking a person's other channels (issue #48): a listed person gets a one-time code and sends
//! "link CODE" from the new channel or number, whose address is then added to their entry. What
//! a code looks like, why one was refused and what the person is told, here; the codes' keeping
//! and the bounds on guessing them are the store's and the service's.

use super::people::AddressKind;
use crate::domain::names::named_enum;

/// Letters and digits nobody confuses when reading them off a phone (no 0/O, 1/I/L): the
/// alphabet of every code a person types (a confirmation's, a link's).
pub const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// A link code's length: 31⁸ ≈ 8.5 × 10¹¹ codes, of which a person has at most a few pending.
pub const LINK_CODE_LENGTH: usize = 8;

/// A link code as typed, read: upper case, dashes and spaces between its halves dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkCode(String);

impl LinkCode {
    /// `raw` as a link code, if it is one (`k7m2-qx9p` is `K7M2QX9P`).
    pub fn parse(raw: &str) -> Option<Self> {
        let code: String = raw.chars().filter(|c| !matches!(c, '-' | ' ')).collect::<String>().to_ascii_uppercase();
        let fits = code.len() == LINK_CODE_LENGTH && code.bytes().all(|b| CODE_ALPHABET.contains(&b));
        fits.then_some(Self(code))
    }

    /// A code of the alphabet's letters at `picks` (each taken modulo its length).
    pub fn of(picks: impl IntoIterator<Item = usize>) -> Self {
        let code = picks.into_iter().take(LINK_CODE_LENGTH).map(|i| char::from(CODE_ALPHABET[i % CODE_ALPHABET.len()]));
        Self(code.collect())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

named_enum! {
    /// Why a link code was not taken. `wrong` says nothing of whether the code ever was one
    /// (expired, used, another tenant's, mistyped): a guess learns nothing.
    LinkRefusal {
        Wrong => "wrong",
        TooMany => "too_many",
        Taken => "taken",
        Listed => "listed",
        Unknown => "unknown",
    }
}

named_enum! {
    /// What a person is told about linking (the `link` template's `step`).
    LinkStep {
        Code => "code",
        Linked => "linked",
        Refused => "refused",
        Notice => "notice",
        Undone => "undone",
    }
}

impl AddressKind {
    /// The kind of address a channel names its senders by (`whatsapp` a number or, as Meta may
    /// name them, a business-scoped user id).
    pub fn of_sender(channel: &str, address: &str) -> Option<Self> {
        let number = !address.is_empty() && address.bytes().all(|b| b.is_ascii_digit());
        Some(match channel {
            "whatsapp" if number => Self::Whatsapp,
            "whatsapp" => Self::WhatsappUserId,
            "twilio" => Self::Phone,
            "telegram" => Self::Telegram,
            "slack" => Self::Slack,
            "messenger" => Self::Messenger,
            "instagram" => Self::Instagram,
            "line" => Self::Line,
            _ => return None,
        })
    }

    /// How a person calls the channel ("your Telegram was linked").
    pub fn channel_name(self) -> &'static str {
        match self {
            Self::Whatsapp | Self::WhatsappUserId => "WhatsApp",
            Self::Phone => "SMS",
            Self::Telegram => "Telegram",
            Self::Slack => "Slack",
            Self::Messenger => "Messenger",
            Self::Instagram => "Instagram",
            Self::Line => "LINE",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_read_as_typed_and_nothing_else_is_one() {
        assert_eq!(LinkCode::parse("k7m2-qx9p").map(|c| c.0), Some("K7M2QX9P".into()));
        assert_eq!(LinkCode::parse("K7M2 QX9P").map(|c| c.0), Some("K7M2QX9P".into()));
        for not_one in ["K7M2QX9", "K7M2QX9PP", "K7M2QX0P", "K7M2QXIP", "1234", ""] {
            assert_eq!(LinkCode::parse(not_one), None, "{not_one}");
        }
        assert_eq!(LinkCode::of([0, 1, 2, 30, 31, 32, 33, 34, 35]).as_str(), "ABC9ABCD");
    }

    #[test]
    fn each_channel_names_its_senders_by_its_kind_of_address() {
        assert_eq!(AddressKind::of_sender("whatsapp", "15550001001"), Some(AddressKind::Whatsapp));
        assert_eq!(AddressKind::of_sender("whatsapp", "US.13491208655302741918"), Some(AddressKind::WhatsappUserId));
        assert_eq!(AddressKind::of_sender("telegram", "tg:700000001"), Some(AddressKind::Telegram));
        assert_eq!(AddressKind::of_sender("hooks", "x"), None);
        assert_eq!(AddressKind::Telegram.channel_name(), "Telegram");
    }
}
