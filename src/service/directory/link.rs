//! A person links their other channels (issue #48): a listed person is given a one-time code
//! (from the API, the console, or by writing "link" where they are known) and sends "link CODE"
//! from the new channel or number, whose address is then added to their entry — a directory
//! change with its evidence, made by the person themselves. Codes are single-use, live an hour by
//! default, are bound to the person and tenant, and are kept only as keyed hashes; a person has
//! at most a few pending. A link can be undone from the person's other channels for a while
//! ("not you? reply STOP"). The bounds on guessing (attempts per sender and per tenant) are
//! intake's, before a code is ever looked up.

use std::time::Duration;

use rand::Rng;
use time::OffsetDateTime;

use super::People;
use super::change::{Change, person_evidence};
use super::manage::{Changing, DirectoryError};
use crate::config::IngestConfig;
use crate::domain::command::TenantId;
use crate::domain::directory::{Address, AddressKind, CODE_ALPHABET, LinkCode, LinkRefusal, Person};
use crate::store::{NewLinkCode, Redeemed, Redemption, StoredPerson};

/// How long a code lives, how many a person may have pending, how long a link can be undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkRules {
    pub code_ttl: Duration,
    pub pending: usize,
    pub undo: Duration,
}

impl Default for LinkRules {
    fn default() -> Self {
        Self { code_ttl: Duration::from_secs(3600), pending: 3, undo: Duration::from_secs(7 * 86_400) }
    }
}

impl From<&IngestConfig> for LinkRules {
    fn from(ingest: &IngestConfig) -> Self {
        Self {
            code_ttl: Duration::from_secs(ingest.link_code_secs),
            pending: usize::try_from(ingest.link_codes_pending).unwrap_or(usize::MAX),
            undo: Duration::from_secs(ingest.link_undo_secs),
        }
    }
}

/// A code given to a person: shown once, never stored as such.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCode {
    pub code: LinkCode,
    pub expires_at: OffsetDateTime,
}

/// What a code offered from an address came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Linked {
    /// The address is the person's; `before` is them without it (where they are told). Also
    /// when this address took this code before (a redelivered message, or one whose answer was
    /// never recorded): the person is told again rather than perhaps never.
    Now {
        before: Person,
        address: Address,
    },
    Refused(LinkRefusal),
}

/// A link undone: the person as they are now, and the address they lost.
#[derive(Debug, Clone, PartialEq)]
pub struct Unlinked {
    pub address: Address,
}

/// How many times a link is written again when another change to the person crossed it.
const WRITE_TRIES: usize = 3;

impl People {
    /// With these rules for link codes (the configuration's `ingest.link_*`).
    pub fn with_links(mut self, rules: LinkRules) -> Self {
        self.links = rules;
        self
    }

    pub fn link_rules(&self) -> LinkRules {
        self.links
    }

    /// A code's keyed hash: what is stored, so that the table gives nobody a code.
    fn code_hash(&self, tenant: &TenantId, code: &LinkCode) -> String {
        self.pseudonym(&format!("link-code:{tenant}:{}", code.as_str()))
    }

    /// A new code for the active person `id`; `NotFound` for anyone else.
    pub async fn issue_link_code(
        &self,
        tenant: &TenantId,
        id: &str,
        at: OffsetDateTime,
    ) -> Result<IssuedCode, DirectoryError> {
        if self.actor(tenant, id).await?.is_none() {
            return Err(DirectoryError::NotFound(id.to_owned()));
        }
        let code = {
            let mut rng = rand::rng();
            LinkCode::of(std::iter::repeat_with(|| rng.random_range(0..CODE_ALPHABET.len())))
        };
        let expires_at = at + self.links.code_ttl;
        let hash = self.code_hash(tenant, &code);
        let new = NewLinkCode { tenant, person: id, code_hash: &hash, issued_at: at, expires_at };
        self.store.link_codes().issue(&new, self.links.pending.max(1)).await?;
        Ok(IssuedCode { code, expires_at })
    }

    /// `code` offered from `address`: its person's, if it is theirs, unused and in time.
    pub async fn redeem_link_code(
        &self,
        tenant: &TenantId,
        code: &LinkCode,
        address: Address,
        at: OffsetDateTime,
    ) -> Result<Linked, DirectoryError> {
        let hash = self.code_hash(tenant, code);
        let undo_until = at + self.links.undo;
        let by = (address.kind.as_str(), address.value.as_str());
        let redemption = Redemption { tenant, code_hash: &hash, by, at, undo_until };
        let person = match self.store.link_codes().redeem(&redemption).await? {
            Redeemed::Refused => return Ok(Linked::Refused(LinkRefusal::Wrong)),
            Redeemed::Fresh { person } | Redeemed::Again { person } => person,
        };
        let who = Changing { tenant, by: super::ChangedBy::Themselves, at };
        match self.change_address(&who, &person, &address, Change::Linked).await {
            Ok(Some(before)) => Ok(Linked::Now { before, address }),
            Ok(None) => Ok(Linked::Refused(LinkRefusal::Wrong)),
            Err(DirectoryError::AddressTaken { .. }) => Ok(Linked::Refused(LinkRefusal::Taken)),
            Err(other) => Err(other),
        }
    }

    /// Undoes the person's latest link still in its window, if there is one and `from` (the
    /// address asking) is not the one it linked — a "stop" on the new channel is the person
    /// cancelling something there: the code marked undone first (so that a redelivered "link
    /// CODE" never links again), then the address gone.
    pub async fn undo_link(
        &self,
        tenant: &TenantId,
        id: &str,
        from: &str,
        at: OffsetDateTime,
    ) -> Result<Option<Unlinked>, DirectoryError> {
        let Some(link) = self.store.link_codes().undoable(tenant, id, at).await? else { return Ok(None) };
        if link.address == from {
            return Ok(None);
        }
        let kind = link.kind.parse::<AddressKind>().map_err(|e| crate::store::StoreError::Corrupt(e.to_string()))?;
        let address = Address { kind, value: link.address };
        self.store.link_codes().undo(tenant, &link.code_hash, at).await?;
        let who = Changing { tenant, by: super::ChangedBy::Themselves, at };
        self.change_address(&who, id, &address, Change::Unlinked).await?;
        Ok(Some(Unlinked { address }))
    }

    /// Adds `address` to person `id` (`Change::Linked`, an active person only) or removes it
    /// (`Change::Unlinked`), written again when another change to them crossed it; the person
    /// without the address (as they were before a link), or none when there is nobody to change.
    async fn change_address(
        &self,
        who: &Changing<'_>,
        id: &str,
        address: &Address,
        change: Change,
    ) -> Result<Option<Person>, DirectoryError> {
        let linking = change == Change::Linked;
        let mut tries = 1;
        loop {
            let current = self.get(who.tenant, id).await?;
            let Some(current) = current.filter(|p| p.person.active || !linking) else { return Ok(None) };
            let mut without = current.person.clone();
            let had = without.addresses.remove(address);
            if had == linking {
                return Ok(Some(without));
            }
            let mut after = without.clone();
            if linking {
                after.addresses.insert(address.clone());
            }
            match self.write_change(who, (&current, &after), change, address.kind).await {
                Ok(_) => return Ok(Some(without)),
                Err(DirectoryError::Stale { .. }) if tries < WRITE_TRIES => tries += 1,
                Err(other) => return Err(other),
            }
        }
    }

    /// Writes a link or its undoing, its evidence naming the kind of address (never the address).
    async fn write_change(
        &self,
        who: &Changing<'_>,
        (before, after): (&StoredPerson, &Person),
        change: Change,
        kind: AddressKind,
    ) -> Result<StoredPerson, DirectoryError> {
        let pseudonym = self.pseudonym(after.id.as_str());
        let mut evidence = person_evidence(change, pseudonym, Some(&before.person), Some(after), &who.by);
        if let Some(decision) = evidence.decision.as_mut() {
            decision["address_kind"] = serde_json::json!(kind.as_str());
        }
        self.write_with(who, after, Some(before), evidence).await
    }
}
