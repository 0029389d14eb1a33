-- `answer_waits` = 1: the webhook that stored the row waits for its admission on the instance that
-- stored it (`ingest.acknowledge = "admitted"`, Twilio's TwiML), which alone can tell the answer.
-- Another live instance that holds the oldest message of the row's conversation takes the
-- conversation's later rows with it (one claim instead of the two instances taking turns), but
-- never one whose answer waits: that one, and the conversation's rows after it, stay where they are.
ALTER TABLE inbox ADD COLUMN answer_waits BIGINT NOT NULL DEFAULT 0 CHECK (answer_waits IN (0, 1));
-- The claim looks for such a row behind each row it would take (src/store/inbox.rs): they are few.
CREATE INDEX inbox_awaited ON inbox (conversation_id, id) WHERE admitted_at IS NULL AND answer_waits = 1;
