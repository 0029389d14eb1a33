-- Retention of records (issue #50): commands that ended past `retention.records` are deleted with
-- their rows, and each tenant's evidence chain is cut before them. The head of what was cut is
-- kept here (its place and hash), and verification continues from it (`audit verify`).
CREATE TABLE evidence_checkpoints (
    chain_id    TEXT PRIMARY KEY,
    seq         BIGINT NOT NULL,               -- the last artifact cut
    hash        TEXT NOT NULL,                 -- its hash: the next artifact's `prev_hash`
    recorded_at BIGINT NOT NULL,               -- when it was recorded
    cut_at      BIGINT NOT NULL                -- when the chain was cut there
);

-- Evidence stays append-only after its chain's checkpoint; what lies at or before it may go
-- (the previous release never deletes evidence, so it is unaffected).
CREATE OR REPLACE FUNCTION evidence_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND OLD.seq <= COALESCE(
        (SELECT seq FROM evidence_checkpoints WHERE chain_id = OLD.chain_id), 0) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'evidence is append-only after its checkpoint';
END;
$$;

-- The purge finds each tenant's records by age, and a command's rows by its id.
CREATE INDEX outbound_by_command ON outbound_messages (command_id);
CREATE INDEX outbound_by_tenant ON outbound_messages (tenant_id, created_at);
CREATE INDEX outbox_done_by_tenant ON outbox (tenant_id, created_at) WHERE status <> 'pending';
CREATE INDEX api_idempotency_by_age ON api_idempotency (tenant_id, created_at);
