-- Agents (the Bloodbank agent machine): one row per dispatch target, moved by compare-and-swap on
-- its version. A row appears the first time its agent changes state; until then it is idle.
CREATE TABLE agents (
    name            TEXT PRIMARY KEY,
    state           TEXT NOT NULL CHECK (state IN ('idle', 'acknowledging', 'working', 'blocked', 'error',
                        'paused')),
    version         BIGINT NOT NULL,
    pre_pause_state TEXT,
    updated_by      TEXT,
    entered_at      BIGINT NOT NULL
);

-- The TTL sweep looks for started commands past their expiry.
CREATE INDEX commands_by_expiry ON commands (state, expires_at);
