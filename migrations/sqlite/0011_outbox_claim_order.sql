-- The claim takes due rows of one kind in (next_attempt_at, id) order, a few at a time. With the
-- id in the index the rows come out already in that order and the claim stops after its batch;
-- without it, every claim read and sorted every due row of the kind, so a backlog of thousands
-- made each claim tens of milliseconds and the dispatcher slowest exactly when it was behind.
CREATE INDEX outbox_claim_order ON outbox (kind, status, next_attempt_at, id);
DROP INDEX outbox_due_by_kind;
