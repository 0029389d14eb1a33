-- Messages chatgate sent (prompts, replies): their provider id, so that status webhooks
-- (sent, delivered, read, failed) update the right row. Written by the outbound worker.
CREATE TABLE outbound_messages (
    id                  TEXT PRIMARY KEY,
    tenant_id           TEXT NOT NULL,
    channel             TEXT NOT NULL,
    provider_message_id TEXT,
    command_id          TEXT REFERENCES commands (command_id),
    recipient           TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('queued', 'sent', 'delivered', 'read', 'failed')),
    status_rank         BIGINT NOT NULL,
    errors              TEXT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    UNIQUE (channel, provider_message_id)
);

CREATE INDEX inbound_by_tenant ON inbound_messages (tenant_id, received_at);

-- Foreign keys are checked from the child side too: inserting a command must find the rows that
-- wait for it (deferred constraints) without scanning these tables.
CREATE INDEX inbound_by_command ON inbound_messages (command_id);
CREATE INDEX outbox_by_command ON outbox (command_id);
