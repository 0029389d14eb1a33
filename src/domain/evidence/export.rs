//! Evidence as it leaves the database (`chatgate audit export`): one JSON line per artifact, in
//! each chain's order, with what verifying it needs — the kept body text its hash covers, the
//! hash and the link to the one before — so that an auditor verifies a file offline
//! (`chatgate audit verify --file`) with the same rules as the database's own check.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::domain::evidence::{ChainBreak, ChainVerifier, Checkpoint, StoredLink};

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

/// One chain of an exported file, checked: where it starts (after the checkpoint its first link
/// names, when it does not start at the chain's beginning) and how many artifacts hold, or where
/// it breaks.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedChain {
    pub chain_id: String,
    pub checkpoint: Option<Checkpoint>,
    pub checked: Result<u64, ChainBreak>,
}

/// Verifies an export's chains, in the order the file gives them, each from its first link: an
/// export made after a chain was cut starts after its checkpoint, at the first artifact kept, and
/// what it holds is verified from there (the checkpoint's own record says whether the cut part
/// is the one an earlier export holds). A chain whose links are not together in the file breaks
/// where it starts again.
pub fn verify_exported(links: impl IntoIterator<Item = ExportedLink>) -> Vec<CheckedChain> {
    let mut checked: Vec<CheckedChain> = Vec::new();
    let mut current: Option<(ChainVerifier, Option<ChainBreak>)> = None;
    for exported in links {
        if checked.last().is_none_or(|last| last.chain_id != exported.chain_id) {
            if let Some(state) = current.take() {
                finish(checked.last_mut(), state);
            }
            let seen = checked.iter().find(|chain| chain.chain_id == exported.chain_id);
            let checkpoint = match seen {
                // Once more, after other chains: a start from anywhere but the chain's first link
                // would pass unseen, so it starts where the chain must, and breaks.
                Some(_) => None,
                None => {
                    (exported.seq > 1).then(|| Checkpoint { seq: exported.seq - 1, hash: exported.prev_hash.clone() })
                }
            };
            let verifier = ChainVerifier::after(&exported.chain_id, checkpoint.as_ref());
            let chain_id = exported.chain_id.clone();
            checked.push(CheckedChain { chain_id, checkpoint, checked: Ok(0) });
            current = Some((verifier, None));
        }
        if let Some((verifier, broken @ None)) = current.as_mut() {
            *broken = verifier.check(exported.into()).err();
        }
    }
    if let Some(state) = current {
        finish(checked.last_mut(), state);
    }
    checked
}

fn finish(chain: Option<&mut CheckedChain>, (verifier, broken): (ChainVerifier, Option<ChainBreak>)) {
    if let Some(chain) = chain {
        chain.checked = match broken {
            Some(broken) => Err(broken),
            None => verifier.finish(None),
        };
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::OffsetDateTime;

    use super::{CheckedChain, ExportedLink, verify_exported};
    use crate::domain::evidence::{Checkpoint, GENESIS_HASH, LinkProblem, hash_body};

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
        let found: Vec<_> = checked.iter().map(|chain| (chain.chain_id.as_str(), chain.checked.clone())).collect();
        assert_eq!(found, [("acme", Ok(3)), ("demo", Ok(2))]);
        assert!(checked.iter().all(|chain| chain.checkpoint.is_none()));
    }

    #[test]
    fn a_chain_split_in_the_file_breaks_where_it_starts_again() {
        let (acme, demo) = (chain("acme", 3), chain("demo", 1));
        let links = acme[..2].iter().chain(&demo).chain(&acme[2..]).cloned();
        let checked = verify_exported(links);
        assert_eq!(checked.len(), 3);
        assert_eq!((checked[0].chain_id.as_str(), checked[0].checked.clone()), ("acme", Ok(2)));
        let broken = checked[2].checked.clone().expect_err("the third link alone is no chain");
        assert_eq!((broken.seq, broken.problem), (3, LinkProblem::Gap { expected_seq: 1 }));
    }

    #[test]
    fn an_export_after_a_cut_is_checked_from_the_checkpoint_its_first_link_names() {
        let acme = chain("acme", 5);
        let checked = verify_exported(acme[2..].iter().cloned());
        let checkpoint = Checkpoint { seq: 2, hash: acme[1].hash.clone() };
        assert_eq!(checked, [CheckedChain { chain_id: "acme".into(), checkpoint: Some(checkpoint), checked: Ok(3) }]);
        let mut altered = acme[2..].to_vec();
        altered[1].body = altered[1].body.replace("acme-4", "acme-9");
        let broken = verify_exported(altered).remove(0).checked.expect_err("an altered link");
        assert_eq!((broken.seq, broken.problem), (4, LinkProblem::ContentAltered));
    }
}
