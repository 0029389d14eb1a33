//! Keeping personal data out of evidence: keyed hashes for joining, masks for reading.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Replaces an identifier by a keyed hash, so that artifacts about one person can be joined by
/// whoever holds the key, while a leaked evidence table gives no phone number away (a plain hash
/// of a ten-digit number is reversed by enumeration; a keyed one is not).
#[derive(Clone)]
pub struct Pseudonymizer {
    mac: Hmac<Sha256>,
}

impl Pseudonymizer {
    pub fn new(key: &[u8]) -> Self {
        // Built once at start-up; HMAC takes a key of any length, so this never fails.
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
        Self { mac }
    }

    pub fn pseudonym(&self, value: &str) -> String {
        let mut mac = self.mac.clone();
        mac.update(value.as_bytes());
        let digest = mac.finalize().into_bytes();
        format!("hk1:{}", hex::encode(&digest[..12]))
    }
}

impl std::fmt::Debug for Pseudonymizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pseudonymizer(..)")
    }
}

/// Shows only the last four characters: `15550000001` becomes `*******0001`.
pub fn mask(value: &str) -> String {
    let hidden = value.chars().count().saturating_sub(4);
    value.chars().enumerate().map(|(i, c)| if i < hidden { '*' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudonyms_are_stable_keyed_and_hide_the_value() {
        let a = Pseudonymizer::new(b"key-a");
        let b = Pseudonymizer::new(b"key-b");
        assert_eq!(a.pseudonym("15550000001"), a.pseudonym("15550000001"));
        assert_ne!(a.pseudonym("15550000001"), b.pseudonym("15550000001"));
        assert_ne!(a.pseudonym("15550000001"), a.pseudonym("15550000002"));
        assert!(!a.pseudonym("15550000001").contains("1555"));
    }

    #[test]
    fn mask_keeps_the_last_four() {
        assert_eq!(mask("15550000001"), "*******0001");
        assert_eq!(mask("abc"), "abc");
    }
}
