-- Changes without a restart: every command registry the gateway has run, by version (the start
-- of its file's SHA-256), so that a command keeps the entry it was admitted under after a reload
-- and any instance can read that version again.
CREATE TABLE registry_versions (
    version     TEXT PRIMARY KEY,
    text        TEXT NOT NULL,
    recorded_at BIGINT NOT NULL
);

-- The registry a command was admitted under (none for commands admitted before this column).
ALTER TABLE commands ADD COLUMN registry_version TEXT;
