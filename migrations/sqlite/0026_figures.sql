-- The figures `/metrics` shows, kept as things change: each is moved in the same transaction as
-- the rows it counts (`store::figures`), so that a scrape reads a few rows of this table however
-- many deliveries and outbox rows there are. `deliveries` (by state, those not closed) and
-- `outbox_pending` (by kind) are running totals (`minute` 0); `deliveries_closed` (by outcome) is
-- counted per minute, and a scrape adds the last hour's. `slot` spreads one figure's writers over
-- a few rows (several instances on one PostgreSQL); a scrape adds them up.
CREATE TABLE figures (
    name   TEXT NOT NULL,
    label  TEXT NOT NULL,
    minute BIGINT NOT NULL,
    slot   INTEGER NOT NULL,
    value  BIGINT NOT NULL,
    PRIMARY KEY (name, label, minute, slot)
);

-- Counted once from what is there (rebuilt at this migration; moved from now on).
INSERT INTO figures (name, label, minute, slot, value)
SELECT 'deliveries', state, 0, 0, COUNT(*) FROM deliveries WHERE state <> 'closed' GROUP BY state;
INSERT INTO figures (name, label, minute, slot, value)
SELECT 'deliveries_closed', COALESCE(outcome, ''), updated_at / 60000, 0, COUNT(*) FROM deliveries
WHERE state = 'closed' AND updated_at >= (CAST(strftime('%s', 'now') AS INTEGER) - 3660) * 1000
GROUP BY COALESCE(outcome, ''), updated_at / 60000;
INSERT INTO figures (name, label, minute, slot, value)
SELECT 'outbox_pending', kind, 0, 0, COUNT(*) FROM outbox WHERE status = 'pending' GROUP BY kind;

-- The oldest waiting row of each kind, without reading the others.
CREATE INDEX outbox_pending_age ON outbox (kind, created_at) WHERE status = 'pending';
