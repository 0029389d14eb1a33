//! Short references: what a person types to name a command in the chat (`status R7K2QX`). Six
//! characters of Crockford's base32 — no `I`, `L`, `O` or `U`, so nothing reads as something
//! else, and a mistyped `O` or `l` still finds the command — taken from a hash of the command
//! id, so every command has one from the start and it never changes. Thirty bits: two commands
//! of one tenant share one about once in a billion pairs, and a lookup that finds two says so
//! rather than guess.

use sha2::{Digest, Sha256};
use uuid::Uuid;

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ShortRef(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a reference (six letters and digits, like R7K2QX)")]
pub struct InvalidShortRef(String);

impl ShortRef {
    pub const LEN: usize = 6;

    /// The reference of a command.
    pub fn of(command_id: Uuid) -> Self {
        let digest = Sha256::digest(command_id.as_bytes());
        let bits = u64::from_be_bytes([0, 0, 0, digest[0], digest[1], digest[2], digest[3], digest[4]]);
        let text = (0..Self::LEN)
            .rev()
            .map(|i| char::from(ALPHABET[usize::try_from((bits >> (5 * i + 10)) & 31).unwrap_or(0)]))
            .collect();
        Self(text)
    }

    /// What a person typed, read the Crockford way: any case, `O` as `0`, `I` and `L` as `1`,
    /// hyphens and spaces ignored.
    pub fn parse(raw: &str) -> Result<Self, InvalidShortRef> {
        let invalid = || InvalidShortRef(raw.chars().take(32).collect());
        let mut text = String::with_capacity(Self::LEN);
        for c in raw.chars().filter(|c| *c != '-' && !c.is_whitespace()) {
            let c = match c.to_ascii_uppercase() {
                'O' => '0',
                'I' | 'L' => '1',
                c => c,
            };
            if !c.is_ascii() || !ALPHABET.contains(&(c as u8)) {
                return Err(invalid());
            }
            text.push(c);
        }
        if text.len() == Self::LEN { Ok(Self(text)) } else { Err(invalid()) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ShortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_has_one_stable_reference_of_six_unambiguous_characters() {
        let id = Uuid::now_v7();
        let reference = ShortRef::of(id);
        assert_eq!(reference, ShortRef::of(id));
        assert_eq!(reference.as_str().len(), ShortRef::LEN);
        assert!(reference.as_str().chars().all(|c| !"ILOU".contains(c) && c.is_ascii_alphanumeric()));
        assert_ne!(reference, ShortRef::of(Uuid::now_v7()));
        assert_eq!(ShortRef::parse(reference.as_str()), Ok(reference));
    }

    #[test]
    fn what_people_type_is_read_the_crockford_way() {
        assert_eq!(ShortRef::parse("r7k2qx").map(|r| r.to_string()), Ok("R7K2QX".to_owned()));
        assert_eq!(ShortRef::parse("RO-lIQX").map(|r| r.to_string()), Ok("R011QX".to_owned()));
        for bad in ["", "R7K2Q", "R7K2QXX", "R7K2QU", "R7K2Q!", "1234", "ÄÄÄÄÄÄ"] {
            assert!(ShortRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn references_spread_over_the_whole_alphabet() {
        let seen: std::collections::BTreeSet<char> =
            (0..2_000).flat_map(|_| ShortRef::of(Uuid::now_v7()).0.chars().collect::<Vec<_>>()).collect();
        assert_eq!(seen.len(), 32, "{seen:?}");
    }
}
