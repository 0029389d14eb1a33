-- `outbox_due` (status, next_attempt_at) answers no query: every read of waiting outbox rows
-- names its kind and goes through `outbox_claim_order` (kind, status, next_attempt_at, id). It
-- cost each outbox row an entry to write and to move at every settle, and once PostgreSQL had
-- statistics its planner took it for the claim over `outbox_claim_order` and read every waiting
-- row of all kinds (issue #49, docs/BENCHMARKS.md, 2026-11-30 fourth session).
-- contract: the previous release reads nothing through this index either (the same statements),
-- so it runs unchanged without it; an index is no data, and a rollback loses nothing.
DROP INDEX outbox_due;
