-- Dispatch to executors: one transport transaction per (command, target), moved by the delivery
-- state machine (CMB seed), with its ACKs and timers. The timers are columns, so they fire after
-- a restart too.
CREATE TABLE deliveries (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL,
    command_id         TEXT NOT NULL REFERENCES commands (command_id),
    target             TEXT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('received', 'validated', 'routed', 'delivered', 'executed',
                           'closed')),
    version            BIGINT NOT NULL,
    outcome            TEXT CHECK (outcome IN ('succeeded', 'failed')),
    failure_class      TEXT,
    detail             TEXT,                      -- JSON: the result, or the error
    delivery_deadline  BIGINT,
    execution_deadline BIGINT,
    ttl_deadline       BIGINT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    UNIQUE (command_id, target)
);
CREATE INDEX deliveries_by_state ON deliveries (state, updated_at);

-- Every event a delivery saw: the moves, the ACKs they record, and the duplicates and refused
-- (out-of-order) ACKs, which move nothing but are kept for diagnosis.
CREATE TABLE delivery_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id TEXT NOT NULL REFERENCES deliveries (id),
    event       TEXT NOT NULL,
    from_state  TEXT NOT NULL,
    to_state    TEXT NOT NULL,
    ack         TEXT,
    outcome     TEXT NOT NULL CHECK (outcome IN ('moved', 'duplicate', 'refused')),
    detail      TEXT,
    at          BIGINT NOT NULL
);
CREATE INDEX delivery_events_by_delivery ON delivery_events (delivery_id, id);
