-- The conversation: where a command's outcome is reported, and the confirmations it waits for.

-- The reply address of a command that came from a chat (JSON: destination, base fields, the
-- command's name); NULL for commands from the API, which answer synchronously.
ALTER TABLE commands ADD COLUMN reply_to TEXT;

-- IDS §X: a confirmation is single-use, short-lived and bound to the command, its idempotency
-- key and the actor who was asked. `code` is what a person types (YES <code>); `nonce` is what
-- the interactive buttons carry.
CREATE TABLE confirmations (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    command_id      TEXT NOT NULL UNIQUE REFERENCES commands (command_id),
    idempotency_key TEXT NOT NULL,
    actor_id        TEXT NOT NULL,
    code            TEXT NOT NULL,
    nonce           TEXT NOT NULL UNIQUE,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'declined', 'expired')),
    prompt          TEXT NOT NULL,             -- the prompt's outbox payload, re-sent to a duplicate
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    answered_at     BIGINT,
    answered_by     TEXT
);
CREATE INDEX confirmations_by_code ON confirmations (tenant_id, code);
CREATE INDEX confirmations_by_actor ON confirmations (tenant_id, actor_id, status);
CREATE INDEX confirmations_due ON confirmations (status, expires_at);

-- Each worker claims its own kind of effect (messages to people, dispatches to executors).
CREATE INDEX outbox_due_by_kind ON outbox (kind, status, next_attempt_at);
