//! The texts of a batch's statements, and which of them each connection keeps prepared.
//!
//! A statement's text is the key of each connection's cache of prepared statements (sqlx's, the
//! 100 it used last, on both backends; the `Any` driver offers no way to make it larger on
//! SQLite). A multi-row insert or an `IN` list of every batch size is a text of its own: a
//! benchmark run of 3,000 commands ran about a thousand texts, so the cache kept none for long
//! and the fixed statements of every transaction (`BEGIN`, a claim, the chain's head) were
//! parsed again after each batch had pushed them out.

/// Whether a multi-row statement of `rows` rows is kept prepared: a single row's text is the
/// same every time; a batch's is one of a hundred sizes, which would push out the texts that do
/// come again. (On PostgreSQL a statement not kept also costs one round trip instead of two.)
pub(crate) fn keep_prepared(rows: usize) -> bool {
    rows == 1
}

/// `keys` repeated at their last up to the next power of two, so that an `IN` list's length is
/// one of a few (eleven up to 1,024), each kept prepared: a key twice in an `IN` list selects,
/// counts and touches its rows once.
pub(crate) fn padded<T>(keys: &[T]) -> impl Iterator<Item = &T> {
    let pad = padded_len(keys.len()) - keys.len();
    keys.iter().chain(keys.last().into_iter().cycle().take(pad))
}

/// How many marks the `IN` list for `keys` keys has: as many as [`padded`] binds.
pub(crate) fn padded_len(keys: usize) -> usize {
    keys.next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_list_has_a_power_of_two_keys_and_a_batch_insert_is_not_kept() {
        let keys = ["a", "b", "c"];
        assert_eq!(padded(&keys).copied().collect::<Vec<_>>(), ["a", "b", "c", "c"]);
        assert_eq!(padded(&keys[..2]).count(), 2);
        assert_eq!(padded(&keys[..1]).count(), 1);
        assert_eq!(padded::<&str>(&[]).count(), 0);
        assert!(keep_prepared(1) && !keep_prepared(2) && !keep_prepared(100));
    }
}
