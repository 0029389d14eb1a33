-- Previews (issue #47): what a mutation's executor said it would do, shown in the confirmation
-- prompt. One row per command, written in the transaction that prompts on it; the dispatch reads it
-- so that the execution carries the preview the person confirmed (its digest), and an executor can
-- refuse a command confirmed on a world that changed since.
CREATE TABLE command_previews (
    command_id TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    digest     TEXT NOT NULL,
    preview    TEXT NOT NULL,
    taken_at   BIGINT NOT NULL
);
