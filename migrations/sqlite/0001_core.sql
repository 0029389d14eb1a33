-- chatgate core schema (SQLite). Times are Unix epoch milliseconds; JSON is kept as text.
-- The PostgreSQL schema in ../postgres has the same tables, columns and constraints.

CREATE TABLE commands (
    command_id        TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL,
    actor_id          TEXT NOT NULL,
    channel           TEXT NOT NULL,
    conversation_id   TEXT NOT NULL,
    message_ids       TEXT NOT NULL,              -- JSON array of provider message ids
    correlation_id    TEXT NOT NULL,
    causation_id      TEXT,
    intent_entity     TEXT NOT NULL,
    intent_action     TEXT NOT NULL,
    intent_target     TEXT,
    args              TEXT NOT NULL,              -- JSON object, normalized
    command_kind      TEXT NOT NULL CHECK (command_kind IN ('read', 'mutation')),
    idempotency_class TEXT NOT NULL CHECK (idempotency_class IN ('I0', 'I1', 'I2', 'I3')),
    idempotency_key   TEXT NOT NULL,
    fingerprint       TEXT NOT NULL,
    risk              TEXT NOT NULL CHECK (risk IN ('low', 'medium', 'high')),
    target_command_id TEXT REFERENCES commands (command_id),
    state             TEXT NOT NULL CHECK (state IN ('received', 'canonicalized', 'confirmation_required',
                          'confirmed', 'authz_pending', 'authorized', 'rejected', 'started', 'executed',
                          'failed', 'canceled', 'compensated')),
    confirmation      TEXT NOT NULL CHECK (confirmation IN ('pending', 'satisfied', 'auto_confirmed')),
    version           BIGINT NOT NULL CHECK (version >= 1),
    reason_code       TEXT,
    received_at       BIGINT NOT NULL,
    expires_at        BIGINT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);
CREATE INDEX commands_by_state ON commands (tenant_id, state, updated_at);
CREATE INDEX commands_by_correlation ON commands (correlation_id);
CREATE INDEX commands_by_target ON commands (target_command_id);

CREATE TABLE command_transitions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    command_id  TEXT NOT NULL REFERENCES commands (command_id),
    version     BIGINT NOT NULL,                  -- the command's version after this move
    from_state  TEXT NOT NULL,
    to_state    TEXT NOT NULL,
    event       TEXT NOT NULL,
    reason_code TEXT,
    at          BIGINT NOT NULL,
    UNIQUE (command_id, version)
);

-- IDS §VIII.B: one reservation per logical command within its tenant.
CREATE TABLE dedupe_records (
    tenant_id       TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    command_id      TEXT NOT NULL REFERENCES commands (command_id) DEFERRABLE INITIALLY DEFERRED,
    fingerprint     TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('in_progress', 'executed', 'failed', 'rejected',
                        'canceled', 'compensated')),
    outcome_ref     TEXT,                         -- artifact id of the terminal evidence
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    ttl_expires_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);
CREATE INDEX dedupe_by_expiry ON dedupe_records (ttl_expires_at);
CREATE INDEX dedupe_by_command ON dedupe_records (command_id);

-- One hash chain per tenant; the head makes removing the newest artifacts detectable.
CREATE TABLE evidence_chains (
    chain_id   TEXT PRIMARY KEY,
    last_seq   BIGINT NOT NULL,
    last_hash  TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE evidence (
    artifact_id TEXT PRIMARY KEY,
    chain_id    TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    command_id  TEXT,
    stage       TEXT,
    recorded_at BIGINT NOT NULL,
    body        TEXT NOT NULL,                    -- the JCS text that `hash` covers
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    UNIQUE (chain_id, seq)
);
CREATE INDEX evidence_by_command ON evidence (command_id, recorded_at);

CREATE TRIGGER evidence_no_update BEFORE UPDATE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;
CREATE TRIGGER evidence_no_delete BEFORE DELETE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;

-- Transport dedupe: a provider's redelivery of one message is one row.
CREATE TABLE inbound_messages (
    id                  TEXT PRIMARY KEY,
    channel             TEXT NOT NULL,
    provider_message_id TEXT NOT NULL,
    tenant_id           TEXT,
    status              TEXT NOT NULL,
    payload             TEXT NOT NULL,
    command_id          TEXT REFERENCES commands (command_id) DEFERRABLE INITIALLY DEFERRED,
    received_at         BIGINT NOT NULL,
    UNIQUE (channel, provider_message_id)
);

-- Transactional outbox: every effect on the outside world is a row written with the state change.
CREATE TABLE outbox (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    command_id      TEXT REFERENCES commands (command_id),
    kind            TEXT NOT NULL,
    destination     TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'done', 'dead')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    locked_until    BIGINT,
    last_error      TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX outbox_due ON outbox (status, next_attempt_at);
