//! Reading the moves in the order of their ids, for the event stream. An id is handed out when
//! a move is written, not when it commits: on PostgreSQL, with several writers, move 41 can
//! commit after move 42 is read. A reader that moved its cursor past 41 would never send it; so a
//! gap in the ids is waited for, for a short grace, before the reader goes past it (a gap that
//! stays is an id a rolled-back transaction used).

use std::time::{Duration, Instant};

/// How long a gap in the ids is waited for: far longer than a transaction that writes moves
/// takes to commit once it has written them.
pub const GAP_GRACE: Duration = Duration::from_secs(2);

/// Where a reader is: the last id it went past, and the gap after it it waits for, since when.
#[derive(Debug, Clone)]
pub struct MoveCursor {
    after: i64,
    gap_since: Option<(i64, Instant)>,
}

impl MoveCursor {
    pub fn new(after: i64) -> Self {
        Self { after, gap_since: None }
    }

    pub fn after(&self) -> i64 {
        self.after
    }

    /// Of `moves` (every id after the cursor, in order, with what the reader may see of each),
    /// the ones that can be sent now, in order; and whether the reader waits for a gap.
    pub fn take<T>(&mut self, moves: Vec<(i64, Option<T>)>, now: Instant) -> (Vec<(i64, T)>, bool) {
        let mut ready = vec![];
        for (id, seen) in moves {
            if id != self.after + 1 {
                match self.gap_since {
                    Some((after, since)) if after == self.after && now.duration_since(since) >= GAP_GRACE => {}
                    Some((after, _)) if after == self.after => return (ready, true),
                    _ => {
                        self.gap_since = Some((self.after, now));
                        return (ready, true);
                    }
                }
            }
            self.after = id;
            self.gap_since = None;
            ready.extend(seen.map(|seen| (id, seen)));
        }
        (ready, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_waited_for_and_gone_past_after_the_grace() {
        let start = Instant::now();
        let mut cursor = MoveCursor::new(40);
        // 41 is another tenant's, 42 ours, 44 ours: 43 is not committed yet.
        let (ready, waiting) = cursor.take(vec![(41, None), (42, Some("a")), (44, Some("c"))], start);
        assert_eq!((ready, waiting, cursor.after()), (vec![(42, "a")], true, 42));
        // 43 commits: everything goes out in order.
        let (ready, waiting) = cursor.take(vec![(43, Some("b")), (44, Some("c"))], start + Duration::from_millis(300));
        assert_eq!((ready, waiting, cursor.after()), (vec![(43, "b"), (44, "c")], false, 44));
        // 45 never commits (rolled back): 46 waits for the grace, then goes.
        let (ready, waiting) = cursor.take(vec![(46, Some("d"))], start + Duration::from_secs(1));
        assert_eq!((ready, waiting), (vec![], true));
        let (ready, waiting) = cursor.take(vec![(46, Some("d"))], start + Duration::from_millis(2_500));
        assert_eq!((ready, waiting), (vec![], true), "the grace counts from when the gap was first seen");
        let (ready, waiting) = cursor.take(vec![(46, Some("d"))], start + Duration::from_millis(3_000));
        assert_eq!((ready, waiting, cursor.after()), (vec![(46, "d")], false, 46));
    }
}
