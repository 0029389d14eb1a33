-- A message whose sender only the tenant's identity resolver can name waits in the inbox, parked
-- (`awaiting_tenant`, `awaiting_address`: the lookup it waits for, `identity_lookups`), instead
-- of in a table of its own: one mechanism keeps, orders and admits every message. Once the
-- resolver answered (or the tenant gave up on it) the row is let go (`released`: `answered` or
-- `given_up`) and admitted as any other, with that answer, never parked again.
ALTER TABLE inbox ADD COLUMN awaiting_tenant TEXT;
ALTER TABLE inbox ADD COLUMN awaiting_address TEXT;
ALTER TABLE inbox ADD COLUMN released TEXT CHECK (released IN ('answered', 'given_up'));
-- What admission claims: waiting, and not parked.
DROP INDEX inbox_pending;
CREATE INDEX inbox_pending ON inbox (id) WHERE admitted_at IS NULL AND awaiting_address IS NULL;
CREATE INDEX inbox_awaiting ON inbox (awaiting_tenant, awaiting_address, id) WHERE awaiting_address IS NOT NULL;
-- (`identity_waits` is no longer written: rows an older version left there are moved into the
-- inbox by the identity worker, src/workers/identity.rs.)
