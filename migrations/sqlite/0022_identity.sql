-- An identity resolver's answers, shared by every instance: what the tenant's resolver said
-- about an address — a person (`actor_id` set) or "unknown" (`actor_id` NULL) — until
-- `expires_at`. The latest answer naming a person also gives their roles when a command of
-- theirs is authorized later.
CREATE TABLE identity_answers (
    tenant_id   TEXT NOT NULL,
    address     TEXT NOT NULL,
    actor_id    TEXT,
    name        TEXT,
    roles       TEXT,                      -- JSON array of role names
    locale      TEXT,
    answered_at BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, address)
);
CREATE INDEX identity_answers_by_actor ON identity_answers (tenant_id, actor_id);

-- Messages waiting for the resolver, stored whole and acknowledged: admitted, in the order they
-- came, once it answers (or, past the tenant's `give_up_after`, handled as an unknown sender's).
CREATE TABLE identity_waits (
    channel             TEXT NOT NULL,
    provider_message_id TEXT NOT NULL,
    tenant_id           TEXT NOT NULL,
    address             TEXT NOT NULL,
    conversation_id     TEXT NOT NULL,
    payload             TEXT NOT NULL,
    received_at         BIGINT NOT NULL,
    PRIMARY KEY (channel, provider_message_id)
);
CREATE INDEX identity_waits_by_address ON identity_waits (tenant_id, address, received_at);

-- The addresses the resolver is being asked about: one row while messages from it wait, leased
-- by one instance at a time.
CREATE TABLE identity_lookups (
    tenant_id       TEXT NOT NULL,
    address         TEXT NOT NULL,
    channel         TEXT NOT NULL,
    profile_name    TEXT,
    first_asked_at  BIGINT NOT NULL,
    attempts        BIGINT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    lease_until     BIGINT NOT NULL,
    last_error      TEXT,
    PRIMARY KEY (tenant_id, address)
);
CREATE INDEX identity_lookups_due ON identity_lookups (next_attempt_at);
