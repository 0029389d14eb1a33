-- Inbound rate limits shared by every instance on one database (GCRA): a key's theoretical
-- arrival time in epoch milliseconds. Used when several gateways share PostgreSQL; a lone SQLite
-- gateway keeps its limits in memory.
CREATE TABLE rate_limits (
    key TEXT PRIMARY KEY,
    tat BIGINT NOT NULL
);
