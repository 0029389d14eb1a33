-- `/readyz` proves the database can still write, not only answer: it updates this one row in a
-- transaction of its own (a full disk or a read-only database fails it).
CREATE TABLE readiness (
    id         BIGINT PRIMARY KEY,
    checked_at BIGINT NOT NULL
);
INSERT INTO readiness (id, checked_at) VALUES (1, 0);
