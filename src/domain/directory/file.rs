//! `config/directory.toml`: the tenants, and the roles and people it seeds each tenant's
//! directory with. Checked at start-up and on every reload, every problem named.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::domain::registry::Currency;

use super::people::{Address, AddressKind, Person, Roles};
use super::{RawResolver, RetentionOverride, Tenant, Tenants, UnknownSenderPolicy};
use crate::domain::command::{ActorId, TenantId};

/// `config/directory.toml` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectoryFile {
    #[serde(default)]
    pub tenants: BTreeMap<String, RawTenant>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTenant {
    display_name: Option<String>,
    #[serde(default)]
    phone_number_ids: Vec<String>,
    /// Twilio numbers (`+14155238886`, without `whatsapp:`) that reach this tenant, for
    /// WhatsApp and SMS alike.
    #[serde(default)]
    twilio_numbers: Vec<String>,
    /// Telegram bots (their usernames) that reach this tenant.
    #[serde(default)]
    telegram_bots: Vec<String>,
    /// Slack workspaces (their team ids, `T…`) whose app reaches this tenant.
    #[serde(default)]
    slack_teams: Vec<String>,
    /// Facebook pages (their ids) whose Messenger reaches this tenant.
    #[serde(default)]
    messenger_pages: Vec<String>,
    /// Instagram professional accounts (their ids) whose messages reach this tenant.
    #[serde(default)]
    instagram_accounts: Vec<String>,
    /// LINE bots (their user ids, the webhook's `destination`) that reach this tenant.
    #[serde(default)]
    line_bots: Vec<String>,
    #[serde(default)]
    unknown_sender: RawUnknownSender,
    locale: Option<String>,
    /// ISO 4217 code of the currency its amounts are in (`USD`).
    currency: Option<String>,
    #[serde(default)]
    roles: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    actors: BTreeMap<String, RawActor>,
    resolver: Option<RawResolver>,
    /// Its own retention, in place of `[retention]`'s (`texts = "30d"`, `records = "7y"`).
    #[serde(default)]
    retention: BTreeMap<String, String>,
}

/// `unknown_sender = "refuse" | "ignore"`, or `unknown_sender = { role = "NAME" }`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(untagged)]
enum RawUnknownSender {
    #[default]
    Unset,
    Keyword(Keyword),
    Role {
        role: String,
    },
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Keyword {
    Refuse,
    Ignore,
}

/// A person as the file lists them. Serde cannot refuse unknown fields beside a flattened map:
/// any other key is taken for an address kind, and one that is none is a problem named.
#[derive(Debug, Clone, Deserialize)]
pub struct RawActor {
    #[serde(default)]
    name: String,
    #[serde(default)]
    roles: Vec<String>,
    /// Meta's business-scoped user id for this person (`US.…`), when they write with it.
    user_id: Option<String>,
    locale: Option<String>,
    /// Their other addresses, each under its kind's name (`AddressKind`): `telegram = "700000001"`,
    /// `slack = "U0ANA"`, `messenger`, `instagram`, `line`, `phone`.
    #[serde(flatten)]
    addresses: BTreeMap<String, String>,
}

impl RawTenant {
    /// Its own address on each channel: the first number, bot, workspace, page or account listed.
    fn reach(&self) -> BTreeMap<AddressKind, String> {
        [
            (AddressKind::Whatsapp, &self.phone_number_ids),
            (AddressKind::Phone, &self.twilio_numbers),
            (AddressKind::Telegram, &self.telegram_bots),
            (AddressKind::Slack, &self.slack_teams),
            (AddressKind::Messenger, &self.messenger_pages),
            (AddressKind::Instagram, &self.instagram_accounts),
            (AddressKind::Line, &self.line_bots),
        ]
        .into_iter()
        .filter_map(|(kind, listed)| listed.first().map(|first| (kind, first.clone())))
        .collect()
    }

    /// Every address that routes to the tenant: numbers, bots, workspaces, pages, accounts.
    fn routes(&self) -> impl Iterator<Item = &String> {
        [
            &self.phone_number_ids,
            &self.twilio_numbers,
            &self.telegram_bots,
            &self.slack_teams,
            &self.messenger_pages,
            &self.instagram_accounts,
            &self.line_bots,
        ]
        .into_iter()
        .flatten()
    }
}

/// What the file seeds the directory with: each tenant's roles and people.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seed {
    pub tenants: BTreeMap<TenantId, (Roles, Vec<Person>)>,
}

impl DirectoryFile {
    /// The tenants and the seed, refusing unknown roles, numbers claimed twice and bad ids;
    /// each problem names the line of `text` (the file) it is on.
    pub fn build(self, text: &str) -> Result<(Tenants, Seed), String> {
        let (mut tenants, mut seed, mut problems) = (Tenants::default(), Seed::default(), vec![]);
        for (name, raw) in self.tenants {
            let id = match TenantId::parse(&name) {
                Ok(id) => id,
                Err(e) => {
                    problems.push(format!("tenants.{name}: {e}"));
                    continue;
                }
            };
            let roles = Roles(
                raw.roles.iter().map(|(role, scopes)| (role.clone(), scopes.iter().cloned().collect())).collect(),
            );
            let unknown_sender = match &raw.unknown_sender {
                RawUnknownSender::Unset | RawUnknownSender::Keyword(Keyword::Refuse) => UnknownSenderPolicy::Refuse,
                RawUnknownSender::Keyword(Keyword::Ignore) => UnknownSenderPolicy::Ignore,
                RawUnknownSender::Role { role } if roles.0.contains_key(role) => {
                    UnknownSenderPolicy::AsRole(role.clone())
                }
                RawUnknownSender::Role { role } => {
                    problems.push(format!("tenants.{name}.unknown_sender: role `{role}` is not defined"));
                    UnknownSenderPolicy::Refuse
                }
            };
            let people = people(&name, &raw, &roles, &mut problems);
            let resolver = raw
                .resolver
                .as_ref()
                .and_then(|r| r.check().map_err(|e| problems.push(format!("tenants.{name}.resolver: {e}"))).ok());
            for number in raw.routes() {
                if let Some(other) = tenants.by_number.insert(number.clone(), name.clone()) {
                    problems.push(format!("number {number} belongs to both `{other}` and `{name}`"));
                }
            }
            let tenant = Tenant {
                id: id.clone(),
                display_name: raw.display_name.clone().unwrap_or_else(|| name.clone()),
                phone_number_ids: raw.phone_number_ids.clone(),
                unknown_sender,
                locale: raw.locale.clone().unwrap_or_else(|| "en".into()),
                currency: raw.currency.as_ref().and_then(|code| match Currency::by_code(code) {
                    Some(currency) => Some(currency.code.to_owned()),
                    None => {
                        problems.push(format!("tenants.{name}.currency: `{code}` is not a currency chatgate knows"));
                        None
                    }
                }),
                resolver,
                reach: raw.reach(),
                retention: retention(&name, &raw.retention, &mut problems),
            };
            tenants.tenants.insert(name, tenant);
            seed.tenants.insert(id, (roles, people));
        }
        if problems.is_empty() {
            return Ok((tenants, seed));
        }
        Err(problems.iter().map(|p| located(text, p)).collect::<Vec<_>>().join("; "))
    }
}

/// A tenant's `retention` table: `texts` and `records`, each a duration.
fn retention(tenant: &str, raw: &BTreeMap<String, String>, problems: &mut Vec<String>) -> RetentionOverride {
    let mut kept = RetentionOverride::default();
    for (key, text) in raw {
        let place = match key.as_str() {
            "texts" => &mut kept.texts,
            "records" => &mut kept.records,
            _ => {
                problems.push(format!("tenants.{tenant}.retention: `{key}` is not `texts` or `records`"));
                continue;
            }
        };
        match humantime::parse_duration(text) {
            Ok(duration) => *place = Some(duration),
            Err(e) => problems.push(format!("tenants.{tenant}.retention.{key}: `{text}` is not a duration: {e}")),
        }
    }
    kept
}

/// `problem` (`tenants.demo.actors.1555…: …`) with the line of the table it names, when the file
/// has that table's header.
fn located(text: &str, problem: &str) -> String {
    let path = problem.split(':').next().unwrap_or_default().trim();
    let mut parts: Vec<&str> = path.split('.').collect();
    while !parts.is_empty() {
        let header = format!("[{}]", parts.join("."));
        if let Some(n) = text.lines().position(|line| line.trim() == header) {
            return format!("line {}: {problem}", n + 1);
        }
        parts.pop();
    }
    problem.to_owned()
}

/// A tenant's people as the file lists them (by their WhatsApp id, which is also their address).
fn people(tenant: &str, raw: &RawTenant, roles: &Roles, problems: &mut Vec<String>) -> Vec<Person> {
    let mut people = vec![];
    for (key, actor) in &raw.actors {
        let at = format!("tenants.{tenant}.actors.{key}");
        let (Ok(id), Ok(number)) = (ActorId::parse(key), Address::new(AddressKind::Whatsapp, key)) else {
            problems.push(format!("{at}: not a WhatsApp id"));
            continue;
        };
        let mut addresses = BTreeSet::from([number]);
        let user_id = actor.user_id.iter().map(|raw| ("user_id", Ok(AddressKind::WhatsappUserId), raw));
        let others = actor.addresses.iter().map(|(field, raw)| (field.as_str(), field.parse::<AddressKind>(), raw));
        for (field, kind, raw) in user_id.chain(others) {
            match kind.map(|kind| Address::new(kind, raw)) {
                Ok(Ok(address)) => drop(addresses.insert(address)),
                Ok(Err(e)) => problems.push(format!("{at}.{field}: {e}")),
                Err(_) => problems.push(format!("{at}.{field}: not a field nor an address kind")),
            }
        }
        let person = Person {
            id,
            name: actor.name.clone(),
            roles: actor.roles.clone(),
            locale: actor.locale.clone(),
            active: true,
            addresses,
        };
        match person.check(roles) {
            Ok(()) => people.push(person),
            Err(e) => problems.push(format!("{at}: {e}")),
        }
    }
    people
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(Tenants, Seed), String> {
        let file: DirectoryFile = toml::from_str(text).map_err(|e| e.to_string())?;
        file.build(text)
    }

    #[test]
    fn tenants_are_found_by_number_and_people_are_seeded_with_their_addresses() {
        let text = include_str!("../../../config/directory.toml")
            .replace("${CHATGATE_DEMO_PHONE_NUMBER_ID:-100000000000001}", "100000000000001")
            .replace("${CHATGATE_DEMO_TWILIO_NUMBER:-+14155238886}", "+14155238886");
        let (tenants, seed) = parse(&text).expect("shipped directory");
        let demo = tenants.tenant_for_number("100000000000001").expect("demo tenant");
        assert_eq!((demo.id.as_str(), &demo.unknown_sender), ("demo", &UnknownSenderPolicy::Refuse));
        let (roles, people) = &seed.tenants[&demo.id];
        let customer = people.iter().find(|p| p.id.as_str() == "15550000001").expect("customer");
        let scopes = roles.scopes_of(&customer.roles);
        assert!(scopes.contains("orders:refund") && !scopes.contains("accounts:close"));
        assert!(customer.addresses.iter().any(|a| a.kind == AddressKind::WhatsappUserId));
        assert!(tenants.tenant_for_number("999").is_none());
    }

    #[test]
    fn unknown_roles_and_shared_numbers_are_refused_and_a_role_for_strangers_is_read() {
        let err = parse("[tenants.a]\n[tenants.a.actors.15550000001]\nroles = [\"ghost\"]\n").expect_err("role");
        assert!(err.contains("role `ghost` is not one of the tenant's"), "{err}");
        let err = parse("[tenants.a]\nphone_number_ids = [\"1\"]\n[tenants.b]\nphone_number_ids = [\"1\"]\n")
            .expect_err("shared");
        assert!(err.contains("belongs to both"), "{err}");
        assert!(parse("[tenants.a]\nunknown_sender = \"shrug\"\n").is_err());
        let err = parse("[tenants.a]\nunknown_sender = { role = \"ghost\" }\n").expect_err("role");
        assert!(err.contains("unknown_sender: role `ghost`"), "{err}");
        let (tenants, _) =
            parse("[tenants.a]\nunknown_sender = { role = \"guest\" }\n[tenants.a.roles]\nguest = [\"orders:read\"]\n")
                .expect("a role for strangers");
        assert_eq!(tenants.tenant("a").expect("a").unknown_sender, UnknownSenderPolicy::AsRole("guest".into()));
    }

    #[test]
    fn a_persons_addresses_are_read_by_their_kinds_names_and_a_key_that_names_none_is_a_problem() {
        let person =
            "[tenants.a.actors.15550000001]\ntelegram = \"tg:7\"\nline = \"U206d25c2ea6bd87c17655609a1c37cb8\"\n";
        let (_, seed) = parse(&format!("[tenants.a]\n{person}")).expect("addresses by kind");
        let people = &seed.tenants[&TenantId::parse("a").expect("id")].1;
        let kinds: Vec<AddressKind> = people[0].addresses.iter().map(|a| a.kind).collect();
        assert_eq!(kinds, [AddressKind::Whatsapp, AddressKind::Telegram, AddressKind::Line]);
        let err = parse("[tenants.a.actors.15550000001]\ntelegarm = \"7\"\n").expect_err("a typo");
        assert!(err.contains("actors.15550000001.telegarm: not a field nor an address kind"), "{err}");
        let err = parse("[tenants.a.actors.15550000001]\nline = \"U1\"\n").expect_err("too short");
        assert!(err.contains("is not a LINE user id"), "{err}");
    }
}
