-- Short references (`R7K2QX`): what people type in the chat to name a command, resolved within
-- the tenant. Derived from the command id when the command is written.
ALTER TABLE commands ADD COLUMN short_ref TEXT;
CREATE INDEX commands_by_short_ref ON commands (tenant_id, short_ref);
