//! The directory: the tenants (which provider numbers reach each, what happens to a sender it
//! does not know, its language), and the people who write to them — their roles, the scopes those
//! grant, and the addresses they write from. Tenants are the deployment's configuration
//! (`config/directory.toml`); people and roles are data (the database), which the same file seeds.

mod fields;
mod file;
mod link;
mod people;
mod resolver;

use std::collections::{BTreeMap, HashMap};

pub use fields::{MAX_ADDRESSES, OneOrMany, PersonFields, RESERVED_ID_PREFIXES};
pub use file::{DirectoryFile, RawActor, RawTenant, Seed};
pub use link::{CODE_ALPHABET, LINK_CODE_LENGTH, LinkCode, LinkRefusal, LinkStep};
pub use people::{
    Actor, Address, AddressKind, INSTAGRAM_PREFIX, LINE_PREFIX, MESSENGER_PREFIX, Person, PersonError, Roles,
    SLACK_PREFIX, TELEGRAM_PREFIX,
};
pub use resolver::{Answer as ResolverAnswer, Lookup, RawResolver, Resolved, Resolver};

use crate::domain::command::TenantId;

/// What to do with a message from a sender the tenant does not list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum UnknownSenderPolicy {
    /// Refused with a reason, and the sender gets a reply saying so.
    #[default]
    Refuse,
    /// Stored and acknowledged, nothing said back.
    Ignore,
    /// Handled as a person with this role (anyone may ask where an order is; nobody unknown may
    /// refund), under an id made of their address.
    AsRole(String),
}

/// A tenant as the deployment configures it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tenant {
    pub id: TenantId,
    pub display_name: String,
    pub phone_number_ids: Vec<String>,
    pub unknown_sender: UnknownSenderPolicy,
    pub locale: String,
    /// ISO 4217: the currency its amounts are in; one written with another is refused.
    pub currency: Option<String>,
    /// Who to ask about a sender the directory does not know, if anyone.
    pub resolver: Option<Resolver>,
    /// The tenant's own address on each channel it is reached on (the first listed): what a
    /// message it starts (an approver asked) is sent from. `phone` is its SMS number (Twilio).
    pub reach: BTreeMap<AddressKind, String>,
    /// How long its texts and records are kept, where it says so (`[retention]` otherwise).
    pub retention: RetentionOverride,
}

/// A tenant's own retention, each part in place of `[retention]`'s when given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionOverride {
    pub texts: Option<std::time::Duration>,
    pub records: Option<std::time::Duration>,
}

impl Tenant {
    /// Who its people's messages are read for: its locale's numbers, its currency.
    pub fn audience(&self) -> crate::domain::registry::Audience {
        crate::domain::registry::Audience { locale: self.locale.clone(), currency: self.currency.clone() }
    }
}

/// The tenants, found by the numbers that reach them.
#[derive(Debug, Clone, Default)]
pub struct Tenants {
    tenants: BTreeMap<String, Tenant>,
    by_number: HashMap<String, String>,
}

impl UnknownSenderPolicy {
    /// The role someone nobody listed writes with, if the tenant gives one.
    pub fn role(&self) -> Option<&str> {
        match self {
            Self::AsRole(role) => Some(role),
            _ => None,
        }
    }
}

impl Tenants {
    /// The tenant a provider number (WhatsApp `phone_number_id`, a Twilio number) belongs to.
    pub fn tenant_for_number(&self, number: &str) -> Option<&Tenant> {
        self.by_number.get(number).and_then(|name| self.tenants.get(name))
    }

    pub fn tenant(&self, id: &str) -> Option<&Tenant> {
        self.tenants.get(id)
    }

    pub fn tenants(&self) -> impl Iterator<Item = &Tenant> {
        self.tenants.values()
    }
}
