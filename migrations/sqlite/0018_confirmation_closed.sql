-- A confirmation is `closed` when its command ends (canceled, recovered) before anyone answered:
-- closed by the move that ends the command, in its transaction. SQLite cannot change a CHECK in
-- place: the table is made again with the new one (nothing references it).
CREATE TABLE confirmations_next (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    command_id      TEXT NOT NULL UNIQUE REFERENCES commands (command_id),
    idempotency_key TEXT NOT NULL,
    actor_id        TEXT NOT NULL,
    code            TEXT NOT NULL,
    nonce           TEXT NOT NULL UNIQUE,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'declined', 'expired', 'closed')),
    prompt          TEXT NOT NULL,             -- the prompt's outbox payload, re-sent to a duplicate
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    answered_at     BIGINT,
    answered_by     TEXT
);
INSERT INTO confirmations_next SELECT id, tenant_id, command_id, idempotency_key, actor_id, code, nonce, status,
    prompt, created_at, expires_at, answered_at, answered_by FROM confirmations;
DROP TABLE confirmations;
ALTER TABLE confirmations_next RENAME TO confirmations;
CREATE INDEX confirmations_by_code ON confirmations (tenant_id, code);
CREATE INDEX confirmations_by_actor ON confirmations (tenant_id, actor_id, status);
CREATE INDEX confirmations_due ON confirmations (status, expires_at);
