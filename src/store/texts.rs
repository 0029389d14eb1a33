//! The texts of a batch's statements, and which of them each connection keeps prepared.
//!
//! A statement's text is the key of each connection's cache of prepared statements (sqlx's, the
//! 100 it used last, on both backends; the `Any` driver offers no way to make it larger on
//! SQLite). A multi-row insert or an `IN` list of every batch size is a text of its own: a
//! benchmark run of 3,000 commands ran about a thousand texts, so the cache kept none for long
//! and the fixed statements of every transaction (`BEGIN`, a claim, the chain's head) were
//! parsed again after each batch had pushed them out.

/// The rows a multi-row statement of `rows` rows is written for (the rest padded with rows that
/// write nothing: `rows::multi_insert_marked`): the next power of four, or `most` (a full
/// statement). A statement then has one of a few texts (six at most: 1, 4, 16, 64, 256 rows and
/// a full one). Powers of four, not two, keep the texts of every batch statement within the
/// cache.
pub(crate) fn statement_rows(rows: usize, most: usize) -> usize {
    let mut size = 1;
    while size < rows {
        size = size.saturating_mul(4);
    }
    size.min(most).max(rows)
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
    fn an_in_list_has_a_power_of_two_keys_and_a_batch_statement_a_power_of_four_rows() {
        let keys = ["a", "b", "c"];
        assert_eq!(padded(&keys).copied().collect::<Vec<_>>(), ["a", "b", "c", "c"]);
        assert_eq!(padded(&keys[..2]).count(), 2);
        assert_eq!(padded(&keys[..1]).count(), 1);
        assert_eq!(padded::<&str>(&[]).count(), 0);
        let sizes: Vec<usize> = [1, 2, 4, 5, 16, 17, 64, 65, 85, 100].iter().map(|r| statement_rows(*r, 85)).collect();
        assert_eq!(sizes, [1, 4, 4, 16, 16, 64, 64, 85, 85, 100], "past `most`: as many as there are");
    }
}
