-- Why a kept message could not be read (a missing sender, id or content): stored beside it, so
-- that whoever looks at an `unreadable` message knows what was wrong without decoding it.
ALTER TABLE inbound_messages ADD COLUMN detail TEXT;
