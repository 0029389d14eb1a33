-- Conversations (issue #48): a command being written in turns ("refund", then "1234", then
-- "25.00"). One per person and channel, kept in the database so that it survives a restart and
-- any instance reads the next turn; `turn` counts the messages taken, so that two instances
-- reading one person's turns at once never both move it (the second retries). A conversation
-- past `expires_at` has ended quietly: it is read as none and replaced by the next. `held` is the
-- outbox row of its question, held for the burst window (`ingest.conversation_burst_ms`) and
-- withdrawn when the next message comes first.
CREATE TABLE conversations (
    tenant_id  TEXT NOT NULL,
    actor_id   TEXT NOT NULL,
    channel    TEXT NOT NULL,
    command    TEXT NOT NULL,
    pattern    TEXT NOT NULL,
    words      TEXT NOT NULL,
    tries      INTEGER NOT NULL,
    turn       BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    held       TEXT,
    PRIMARY KEY (tenant_id, actor_id, channel)
);
-- The clean-up forgets the conversations that ended quietly (`store::conversations::FORGET_ENDED`).
CREATE INDEX conversations_expiry ON conversations (expires_at);
