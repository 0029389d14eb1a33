-- Approvals (issue #46): a command whose policy needs other people's approval waits in
-- `authz_pending` with one row here, opened by the step that moved it there. `needs` is what the
-- policy asked when it was requested (the rules, their roles, quorums and waits), so that a
-- registry changed since decides nothing for it. Settling one (approved, denied, expired,
-- overridden, closed) is a compare-and-set on `status = 'pending'` in the step that moves its
-- command, so it is settled once, whichever instance gets there first.
CREATE TABLE approvals (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    command_id      TEXT NOT NULL UNIQUE REFERENCES commands (command_id),
    idempotency_key TEXT NOT NULL,
    requester       TEXT NOT NULL,
    needs           TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'overridden', 'closed')),
    requested_at    BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    settled_at      BIGINT,
    settled_by      TEXT,
    -- How many decisions were recorded: recording one bumps it first, so that deciders on
    -- several instances take turns and each sees every decision before it.
    decided         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX approvals_pending ON approvals (tenant_id, status, requested_at);
CREATE INDEX approvals_due ON approvals (status, expires_at);

-- Each person's decision on an approval, once: a redelivered tap, a double tap or a tap on a
-- second channel finds their row and counts for nothing more.
CREATE TABLE approval_decisions (
    approval_id TEXT NOT NULL REFERENCES approvals (id),
    approver    TEXT NOT NULL,
    roles       TEXT NOT NULL,
    decision    TEXT NOT NULL CHECK (decision IN ('approve', 'deny')),
    via         TEXT NOT NULL,
    reason      TEXT,
    decided_at  BIGINT NOT NULL,
    PRIMARY KEY (approval_id, approver)
);
