//! Evidence as it leaves the database (`chatgate audit export`): one JSON line per artifact, in
//! each chain's order, with what verifying it needs — the kept body text its hash covers, the
//! hash and the link to the one before — so that an auditor verifies a file offline
//! (`chatgate audit verify --file`) with the same rules as the database's own check.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::domain::evidence::{ChainBreak, ChainVerifier, StoredLink};

/// One artifact of an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedLink {
    pub chain_id: String,
    pub seq: i64,
    pub artifact_id: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub recorded_at: OffsetDateTime,
    pub prev_hash: String,
    pub hash: String,
    /// The canonical JSON text (RFC 8785) the hash covers, exactly as stored.
    pub body: String,
}

impl From<ExportedLink> for StoredLink {
    /// The link as the chain's verifier checks it.
    fn from(exported: ExportedLink) -> Self {
        Self {
            artifact_id: exported.artifact_id,
            seq: exported.seq,
            prev_hash: exported.prev_hash,
            hash: exported.hash,
            body: exported.body,
        }
    }
}

/// One chain of an exported file, checked: how many artifacts hold, or where it breaks.
pub type CheckedChain = (String, Result<u64, ChainBreak>);

/// Verifies an export's chains, each from its first link, in the order the file gives them; a
/// chain whose links are not together in the file breaks where the gap is.
pub fn verify_exported(links: impl IntoIterator<Item = ExportedLink>) -> Vec<CheckedChain> {
    let mut checked: Vec<CheckedChain> = Vec::new();
    let mut current: Option<(ChainVerifier, Option<ChainBreak>)> = None;
    let mut finish = |chain_id: String, state: (ChainVerifier, Option<ChainBreak>)| {
        let result = match state {
            (_, Some(broken)) => Err(broken),
            (verifier, None) => verifier.finish(None),
        };
        checked.push((chain_id, result));
    };
    let mut current_id = String::new();
    for exported in links {
        if current.is_none() || exported.chain_id != current_id {
            if let Some(state) = current.take() {
                finish(std::mem::take(&mut current_id), state);
            }
            current_id = exported.chain_id.clone();
            current = Some((ChainVerifier::new(&exported.chain_id), None));
        }
        if let Some((verifier, broken @ None)) = current.as_mut() {
            *broken = verifier.check(exported.into()).err();
        }
    }
    if let Some(state) = current {
        finish(current_id, state);
    }
    checked
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::OffsetDateTime;

    use super::{ExportedLink, verify_exported};
    use crate::domain::evidence::{GENESIS_HASH, LinkProblem, hash_body};

    fn chain(chain_id: &str, n: i64) -> Vec<ExportedLink> {
        let mut prev = GENESIS_HASH.to_owned();
        (1..=n)
            .map(|seq| {
                let artifact_id = format!("{chain_id}-{seq}");
                let body = json!({"artifact_id": artifact_id, "chain_id": chain_id, "seq": seq, "prev_hash": prev});
                let hash = hash_body(&body);
                ExportedLink {
                    chain_id: chain_id.to_owned(),
                    seq,
                    artifact_id,
                    kind: "command.accepted".into(),
                    command_id: None,
                    recorded_at: OffsetDateTime::UNIX_EPOCH,
                    prev_hash: std::mem::replace(&mut prev, hash.clone()),
                    hash,
                    body: body.to_string(),
                }
            })
            .collect()
    }

    #[test]
    fn each_chain_of_a_file_is_checked_from_its_first_link() {
        let links = chain("acme", 3).into_iter().chain(chain("demo", 2));
        let checked = verify_exported(links);
        assert_eq!(checked, [("acme".to_owned(), Ok(3)), ("demo".to_owned(), Ok(2))]);
    }

    #[test]
    fn a_chain_split_in_the_file_breaks_where_it_starts_again() {
        let (acme, demo) = (chain("acme", 3), chain("demo", 1));
        let links = acme[..2].iter().chain(&demo).chain(&acme[2..]).cloned();
        let checked = verify_exported(links);
        assert_eq!(checked.len(), 3);
        assert_eq!(checked[0], ("acme".to_owned(), Ok(2)));
        let broken = checked[2].1.clone().expect_err("the third link alone is no chain");
        assert_eq!((broken.seq, broken.problem), (3, LinkProblem::Gap { expected_seq: 1 }));
    }
}
