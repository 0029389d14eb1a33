//! How the gateway reaches a person it was not answering (an approver asked to decide): on the
//! first of their own channels, in this order — WhatsApp, Slack, Telegram, Messenger, Instagram,
//! SMS —, from the tenant's own address on that channel, with the provider addresses each channel
//! sends between (as its inbound messages give them). A person whose id is a phone number and who
//! lists nothing else is reached on WhatsApp. LINE is not in the list: its replies need a token
//! from the message they answer.

use crate::domain::command::Channel;
use crate::domain::directory::{AddressKind, Person, Tenant};
use crate::domain::outbound::{ProviderAddresses, ReplyAddress};

/// The channels a person may be reached on, in the order they are tried.
const PREFERRED: [AddressKind; 6] = [
    AddressKind::Whatsapp,
    AddressKind::Slack,
    AddressKind::Telegram,
    AddressKind::Messenger,
    AddressKind::Instagram,
    AddressKind::Phone,
];

/// Where `person` is reached for `tenant`: the address, and the conversation's name the replies
/// of that channel are kept under (`channel:business:person`). `None` when the tenant is reached
/// on none of the person's channels.
pub fn reach(person: &Person, tenant: &Tenant, locale: &str) -> Option<(ReplyAddress, String)> {
    let listed = |kind: AddressKind| person.addresses.iter().find(|a| a.kind == kind).map(|a| a.value.clone());
    let found = PREFERRED.iter().find_map(|kind| Some((*kind, listed(*kind)?, tenant.reach.get(kind)?)));
    let id = person.id.as_str();
    let by_id = || {
        let number = (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then(|| id.to_owned())?;
        Some((AddressKind::Whatsapp, number, tenant.reach.get(&AddressKind::Whatsapp)?))
    };
    let (kind, value, business) = found.or_else(by_id)?;
    let address = address(kind, &value, business, locale)?;
    let conversation = format!("{}:{}:{}", address.channel, address.business, address.person);
    Some((address, conversation))
}

/// The address of `value` (as the directory keeps it) on `kind`'s channel, from `business`.
fn address(kind: AddressKind, value: &str, business: &str, locale: &str) -> Option<ReplyAddress> {
    let channel = |name: &str| Channel::parse(name).ok();
    let own = |name: &str, provider: &str| {
        let mut address = ReplyAddress::new(channel(name)?, business, value, locale);
        address.provider = Some(ProviderAddresses { business: business.to_owned(), person: provider.to_owned() });
        Some(address)
    };
    let without = |prefix: &str| value.strip_prefix(prefix).unwrap_or(value).to_owned();
    match kind {
        AddressKind::Whatsapp => Some(ReplyAddress::new(channel("whatsapp")?, business, value, locale)),
        // A DM: Slack opens it with the bot for a user id given as the channel.
        AddressKind::Slack => own("slack", &without(crate::domain::directory::SLACK_PREFIX)),
        // A private chat's id is its user's.
        AddressKind::Telegram => own("telegram", &without(crate::domain::directory::TELEGRAM_PREFIX)),
        AddressKind::Messenger => own("messenger", &without(crate::domain::directory::MESSENGER_PREFIX)),
        AddressKind::Instagram => own("instagram", &without(crate::domain::directory::INSTAGRAM_PREFIX)),
        // SMS through Twilio: routed by the digits, sent between E.164 numbers.
        AddressKind::Phone => {
            let digits = value.trim_start_matches('+');
            let mut address = ReplyAddress::new(channel("twilio")?, business, digits, locale);
            let person = format!("+{digits}");
            address.provider = Some(ProviderAddresses { business: business.to_owned(), person });
            Some(address)
        }
        AddressKind::WhatsappUserId | AddressKind::Line => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::domain::command::{ActorId, TenantId};
    use crate::domain::directory::{Address, UnknownSenderPolicy};

    fn tenant() -> Tenant {
        let reach: BTreeMap<AddressKind, String> = [
            (AddressKind::Whatsapp, "100"),
            (AddressKind::Slack, "T0DEMO"),
            (AddressKind::Telegram, "demo_bot"),
            (AddressKind::Phone, "+14155238886"),
        ]
        .into_iter()
        .map(|(kind, own)| (kind, own.to_owned()))
        .collect();
        Tenant {
            id: TenantId::parse("demo").expect("id"),
            display_name: "Demo".into(),
            phone_number_ids: vec!["100".into()],
            unknown_sender: UnknownSenderPolicy::Refuse,
            locale: "en".into(),
            currency: None,
            resolver: None,
            reach,
            retention: Default::default(),
        }
    }

    fn person(id: &str, addresses: &[(AddressKind, &str)]) -> Person {
        let addresses: BTreeSet<Address> =
            addresses.iter().map(|(kind, value)| Address { kind: *kind, value: (*value).to_owned() }).collect();
        Person {
            id: ActorId::parse(id).expect("id"),
            name: id.into(),
            roles: vec![],
            locale: None,
            active: true,
            addresses,
        }
    }

    #[test]
    fn a_person_is_reached_on_their_first_channel_the_tenant_is_on() {
        let tenant = tenant();
        let (slack, conversation) =
            reach(&person("s", &[(AddressKind::Slack, "slack:U0S")]), &tenant, "en").expect("slack");
        assert_eq!((slack.channel.as_str(), slack.endpoints()), ("slack", ("T0DEMO", "U0S")));
        assert_eq!(conversation, "slack:T0DEMO:slack:U0S");
        let both = person("b", &[(AddressKind::Telegram, "tg:7"), (AddressKind::Whatsapp, "1555")]);
        assert_eq!(reach(&both, &tenant, "en").expect("whatsapp").0.channel.as_str(), "whatsapp", "WhatsApp first");
        let sms = reach(&person("p", &[(AddressKind::Phone, "15559990009")]), &tenant, "en").expect("sms").0;
        assert_eq!((sms.channel.as_str(), sms.endpoints()), ("twilio", ("+14155238886", "+15559990009")));
        let by_id = reach(&person("15550000003", &[]), &tenant, "pt").expect("whatsapp").0;
        assert_eq!((by_id.person.as_str(), by_id.locale.as_str()), ("15550000003", "pt"));
        // Messenger is not among the tenant's channels, LINE is never used to start a message.
        assert!(reach(&person("m", &[(AddressKind::Messenger, "fb:9")]), &tenant, "en").is_none());
        assert!(reach(&person("l", &[(AddressKind::Line, "line:U1")]), &tenant, "en").is_none());
    }
}
