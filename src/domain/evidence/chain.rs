//! The hash chain over each tenant's evidence, and its offline verification.
//!
//! Every artifact stores the previous artifact's hash and its own hash over its canonical (JCS)
//! content. The chain head (last sequence number and hash) is kept beside it, so that removing
//! the newest artifacts is caught too, not only edits and removals in the middle.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The `prev_hash` of the first artifact in a chain.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// `hex(SHA-256(JCS(body)))`.
pub fn hash_body(body: &Value) -> String {
    hash_canonical(crate::domain::canonical::to_string(body).as_bytes())
}

/// The hash of text that is already in canonical (JCS) form.
pub fn hash_canonical(canonical: &[u8]) -> String {
    hex::encode(Sha256::digest(canonical))
}

/// Where a chain was cut (retention): the last artifact removed, whose hash the first one kept
/// links to. Verification continues from it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    pub seq: i64,
    pub hash: String,
}

/// One stored artifact as the verifier sees it: the columns and the kept body text.
#[derive(Debug, Clone)]
pub struct StoredLink {
    pub artifact_id: String,
    pub seq: i64,
    pub prev_hash: String,
    pub hash: String,
    pub body: String,
}

/// What the store says the newest artifact of a chain is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainHead {
    pub last_seq: i64,
    pub last_hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum LinkProblem {
    /// The body is not the JSON that was written.
    Unreadable,
    /// The body no longer hashes to the stored hash: it was edited.
    ContentAltered,
    /// The body names another position or chain than the row it sits in: moved or swapped.
    PositionMismatch,
    /// The sequence jumps: an artifact before this one was removed.
    Gap { expected_seq: i64 },
    /// The link to the previous artifact does not hold: removed, reordered or forged.
    BrokenLink,
    /// The chain ends before, or elsewhere than, its recorded head: the newest were removed.
    HeadMismatch { head_seq: i64 },
}

/// The first link that does not hold.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChainBreak {
    pub chain_id: String,
    /// The artifact at which the chain stops holding (the last good one for a head mismatch).
    pub artifact_id: Option<String>,
    pub seq: i64,
    #[serde(flatten)]
    pub problem: LinkProblem,
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.problem {
            LinkProblem::Unreadable => "its content is not readable".to_owned(),
            LinkProblem::ContentAltered => "its content was altered".to_owned(),
            LinkProblem::PositionMismatch => "it was moved from its position".to_owned(),
            LinkProblem::Gap { expected_seq } => format!("artifact #{expected_seq} is missing"),
            LinkProblem::BrokenLink => "it does not link to the artifact before it".to_owned(),
            LinkProblem::HeadMismatch { head_seq } => {
                format!("the chain should end at #{head_seq}: newer artifacts were removed")
            }
        };
        let id = self.artifact_id.as_deref().unwrap_or("-");
        write!(f, "chain `{}` breaks at #{} (artifact {id}): {what}", self.chain_id, self.seq)
    }
}

/// Checks one chain a link at a time, in sequence order, so that a chain of any length can be
/// verified page by page.
#[derive(Debug)]
pub struct ChainVerifier {
    chain_id: String,
    expected_seq: i64,
    prev_hash: String,
    last_id: Option<String>,
    count: u64,
}

impl ChainVerifier {
    pub fn new(chain_id: &str) -> Self {
        Self::after(chain_id, None)
    }

    /// A verifier that starts after `checkpoint` (the chain's first link without one).
    pub fn after(chain_id: &str, checkpoint: Option<&Checkpoint>) -> Self {
        let (seq, hash) = checkpoint.map_or((0, GENESIS_HASH), |cut| (cut.seq, cut.hash.as_str()));
        Self {
            chain_id: chain_id.to_owned(),
            expected_seq: seq + 1,
            prev_hash: hash.to_owned(),
            last_id: None,
            count: 0,
        }
    }

    /// Checks the next link; the first one that does not hold is the break to report.
    pub fn check(&mut self, link: StoredLink) -> Result<(), ChainBreak> {
        let broken = |problem| ChainBreak {
            chain_id: self.chain_id.clone(),
            artifact_id: Some(link.artifact_id.clone()),
            seq: link.seq,
            problem,
        };
        if link.seq != self.expected_seq {
            return Err(broken(LinkProblem::Gap { expected_seq: self.expected_seq }));
        }
        let body: Value = serde_json::from_str(&link.body).map_err(|_| broken(LinkProblem::Unreadable))?;
        if hash_body(&body) != link.hash {
            return Err(broken(LinkProblem::ContentAltered));
        }
        let text = |field: &str| body.get(field).and_then(Value::as_str);
        if body.get("seq").and_then(Value::as_i64) != Some(link.seq)
            || text("chain_id") != Some(self.chain_id.as_str())
            || text("artifact_id") != Some(link.artifact_id.as_str())
        {
            return Err(broken(LinkProblem::PositionMismatch));
        }
        if link.prev_hash != self.prev_hash || text("prev_hash") != Some(self.prev_hash.as_str()) {
            return Err(broken(LinkProblem::BrokenLink));
        }
        self.prev_hash = link.hash;
        self.last_id = Some(link.artifact_id);
        self.expected_seq += 1;
        self.count += 1;
        Ok(())
    }

    /// The sequence number of the last link checked (0 before the first).
    pub fn checked_through(&self) -> i64 {
        self.expected_seq - 1
    }

    /// After the last link: the chain must end where its head says. Returns the link count.
    pub fn finish(self, head: Option<&ChainHead>) -> Result<u64, ChainBreak> {
        let last_seq = self.expected_seq - 1;
        match head {
            Some(head) if head.last_seq != last_seq || head.last_hash != self.prev_hash => Err(ChainBreak {
                chain_id: self.chain_id,
                artifact_id: self.last_id,
                seq: last_seq,
                problem: LinkProblem::HeadMismatch { head_seq: head.last_seq },
            }),
            _ => Ok(self.count),
        }
    }
}

/// Verifies a whole chain held in memory.
pub fn verify_chain(
    chain_id: &str,
    links: impl IntoIterator<Item = StoredLink>,
    head: Option<&ChainHead>,
) -> Result<u64, ChainBreak> {
    let mut verifier = ChainVerifier::new(chain_id);
    for link in links {
        verifier.check(link)?;
    }
    verifier.finish(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chain(n: i64) -> (Vec<StoredLink>, ChainHead) {
        let mut prev = GENESIS_HASH.to_owned();
        let mut links = vec![];
        for seq in 1..=n {
            let id = format!("a{seq}");
            let body = json!({"artifact_id": id, "chain_id": "demo", "seq": seq, "prev_hash": prev,
                "kind": "command.accepted"});
            let hash = hash_body(&body);
            links.push(StoredLink {
                artifact_id: id,
                seq,
                prev_hash: prev.clone(),
                hash: hash.clone(),
                body: body.to_string(),
            });
            prev = hash;
        }
        (links, ChainHead { last_seq: n, last_hash: prev })
    }

    #[test]
    fn an_intact_chain_verifies() {
        let (links, head) = chain(5);
        assert_eq!(verify_chain("demo", links, Some(&head)), Ok(5));
        assert_eq!(
            verify_chain("demo", vec![], Some(&ChainHead { last_seq: 0, last_hash: GENESIS_HASH.into() })),
            Ok(0)
        );
    }

    #[test]
    fn an_edit_is_named() {
        let (mut links, head) = chain(5);
        links[2].body = links[2].body.replace("command.accepted", "command.canceled");
        let err = verify_chain("demo", links, Some(&head)).expect_err("edited");
        assert_eq!((err.seq, err.problem), (3, LinkProblem::ContentAltered));
    }

    #[test]
    fn an_edit_with_a_recomputed_hash_breaks_the_next_link() {
        let (mut links, head) = chain(5);
        let mut body: Value = serde_json::from_str(&links[1].body).expect("json");
        body["kind"] = json!("forged");
        links[1].hash = hash_body(&body);
        links[1].body = body.to_string();
        let err = verify_chain("demo", links, Some(&head)).expect_err("forged");
        assert_eq!((err.seq, err.problem), (3, LinkProblem::BrokenLink));
    }

    #[test]
    fn a_removal_in_the_middle_or_at_the_end_is_named() {
        let (mut links, head) = chain(5);
        links.remove(1);
        let err = verify_chain("demo", links, Some(&head)).expect_err("gap");
        assert_eq!((err.seq, err.problem), (3, LinkProblem::Gap { expected_seq: 2 }));

        let (mut links, head) = chain(5);
        links.pop();
        let err = verify_chain("demo", links, Some(&head)).expect_err("tail");
        assert_eq!((err.seq, err.problem), (4, LinkProblem::HeadMismatch { head_seq: 5 }));
    }

    #[test]
    fn a_swap_is_named() {
        let (mut links, head) = chain(5);
        // Swap the content of #2 and #3 but keep the sequence column in order.
        let (a, b) = (links[1].clone(), links[2].clone());
        links[1] = StoredLink { seq: 2, ..b };
        links[2] = StoredLink { seq: 3, ..a };
        let err = verify_chain("demo", links, Some(&head)).expect_err("swapped");
        assert_eq!((err.seq, err.problem), (2, LinkProblem::PositionMismatch));
    }
}
