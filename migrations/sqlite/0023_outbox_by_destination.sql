-- A bare "1" answers the last message to its sender when that message offered a suggestion
-- (docs/LANGUAGE.md): found by destination, newest first.
CREATE INDEX outbox_by_destination ON outbox (destination, id);
