-- Locks on what a mutation changes (issue #47): a row per tenant and resource (`{entity}:{target}`,
-- `order:1234`), held by the command that changes it. Taken in the transaction that admits the
-- command, deleted in the one that ends it (beside its dedupe record's settling, which every end
-- goes through) or by an operator; a command that holds one is a row of `commands` too, so a crash
-- leaves nothing behind that its own end will not release.
CREATE TABLE resource_locks (
    tenant_id  TEXT NOT NULL,
    resource   TEXT NOT NULL,
    command_id TEXT NOT NULL,
    taken_at   BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, resource)
);
CREATE INDEX resource_locks_holder ON resource_locks (command_id);
