-- no-transaction
-- Executor-requested approvals (issue #46, workflow seed §6.10): an executor may answer that the
-- execution waits for people's approval. The delivery machine gets its `waiting` state, and the
-- approval is a row of `approvals` like a policy's, marked by `origin`, naming the delivery's
-- `target` and what the executor said (`wait`, JSON). A command has at most one policy approval; an executor
-- may ask more than once (each waiting answer of a delivery that was resumed).
--
-- SQLite changes a CHECK or a UNIQUE only by building the table again (sqlite.org, "ALTER TABLE",
-- the twelve steps): with foreign keys off, which only works outside a transaction, so this file
-- opens its own.
PRAGMA foreign_keys = OFF;
BEGIN;

CREATE TABLE deliveries_next (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL,
    command_id         TEXT NOT NULL REFERENCES commands (command_id),
    target             TEXT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('received', 'validated', 'routed', 'delivered', 'waiting',
                           'executed', 'closed')),
    version            BIGINT NOT NULL,
    outcome            TEXT CHECK (outcome IN ('succeeded', 'failed')),
    failure_class      TEXT,
    detail             TEXT,
    delivery_deadline  BIGINT,
    execution_deadline BIGINT,
    ttl_deadline       BIGINT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    UNIQUE (command_id, target)
);
INSERT INTO deliveries_next (id, tenant_id, command_id, target, state, version, outcome, failure_class, detail,
    delivery_deadline, execution_deadline, ttl_deadline, created_at, updated_at)
SELECT id, tenant_id, command_id, target, state, version, outcome, failure_class, detail,
    delivery_deadline, execution_deadline, ttl_deadline, created_at, updated_at FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_next RENAME TO deliveries;
CREATE INDEX deliveries_by_state ON deliveries (state, updated_at);

CREATE TABLE approvals_next (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    command_id      TEXT NOT NULL REFERENCES commands (command_id),
    idempotency_key TEXT NOT NULL,
    requester       TEXT NOT NULL,
    needs           TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'overridden', 'closed')),
    requested_at    BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    settled_at      BIGINT,
    settled_by      TEXT,
    decided         INTEGER NOT NULL DEFAULT 0,
    origin          TEXT NOT NULL DEFAULT 'policy' CHECK (origin IN ('policy', 'executor')),
    target          TEXT,
    wait            TEXT,
    -- Escalation: when the earliest escalation of a pending approval is due, the holders of its
    -- roles are asked; this is that moment, cleared once they were asked.
    escalates_at    BIGINT
);
INSERT INTO approvals_next (id, tenant_id, command_id, idempotency_key, requester, needs, status, requested_at,
    expires_at, settled_at, settled_by, decided)
SELECT id, tenant_id, command_id, idempotency_key, requester, needs, status, requested_at,
    expires_at, settled_at, settled_by, decided FROM approvals;
DROP TABLE approvals;
ALTER TABLE approvals_next RENAME TO approvals;
CREATE INDEX approvals_pending ON approvals (tenant_id, status, requested_at);
CREATE INDEX approvals_due ON approvals (status, expires_at);
CREATE UNIQUE INDEX approvals_policy_once ON approvals (command_id) WHERE origin = 'policy';
CREATE INDEX approvals_of_command ON approvals (command_id, requested_at);
CREATE INDEX approvals_escalation ON approvals (escalates_at) WHERE escalates_at IS NOT NULL;

COMMIT;
PRAGMA foreign_keys = ON;
