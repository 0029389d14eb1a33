-- The inbox: every verified provider message, stored durably before the webhook is answered and
-- admitted behind the answer (docs/ARCHITECTURE.md, "The path of one webhook"). One row per
-- provider message: a redelivery finds its row. `owner` is the instance that admits it while that
-- instance is alive (`inbox_owners`); once its heartbeat has run out (it died) another instance
-- takes its rows over. Admitted rows stay, for recognizing redeliveries, until the clean-up
-- removes them with the dedupe records.
-- On SQLite the inbox is a database file of its own (`<name>-inbox.db` beside the main file), so
-- that its commits never wait for SQLite's one writer of the main file (src/store/inbox_db.rs).
CREATE TABLE inbox (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    channel             TEXT NOT NULL,
    provider_message_id TEXT NOT NULL,
    conversation_id     TEXT NOT NULL,
    payload             TEXT NOT NULL,
    hold_ms             BIGINT,
    trace_parent        TEXT,                  -- the webhook's W3C traceparent, for admission's spans
    received_at         BIGINT NOT NULL,
    owner               TEXT NOT NULL,
    admitted_at         BIGINT,
    UNIQUE (channel, provider_message_id)
);
CREATE INDEX inbox_pending ON inbox (id) WHERE admitted_at IS NULL;
-- (PostgreSQL's `inbox_pending_by_conversation` finds another live instance's older message of a
-- conversation; one process writes a SQLite database, so there is none to find here.)
CREATE INDEX inbox_admitted ON inbox (admitted_at) WHERE admitted_at IS NOT NULL;

-- Each instance that stores messages, alive until `alive_until` (it moves that on every second):
-- one row per instance, so that holding thousands of waiting messages costs one write a second.
CREATE TABLE inbox_owners (
    owner       TEXT PRIMARY KEY,
    alive_until BIGINT NOT NULL
);
