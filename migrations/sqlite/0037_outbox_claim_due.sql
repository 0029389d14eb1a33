-- The claim's order, (kind, next_attempt_at, id), for the waiting rows only. Keyed on `status`
-- as `outbox_claim_order` was, every row's entry was written when the row was and moved when it
-- was settled, to sit among the done rows that no claim reads: one of the pages a command's
-- commits write most (docs/BENCHMARKS.md, 2026-12-02 third session, issue #49). Every statement
-- that read through the old index names `status = 'pending'`, so it reads through this one;
-- a settled row's entry is now only taken out.
CREATE INDEX outbox_claim_due ON outbox (kind, next_attempt_at, id) WHERE status = 'pending';
-- contract: the previous release's statements are these same ones: each names `status =
-- 'pending'` and reads through `outbox_claim_due`, so it runs unchanged without the old index;
-- an index is no data, and a rollback loses nothing.
DROP INDEX outbox_claim_order;
