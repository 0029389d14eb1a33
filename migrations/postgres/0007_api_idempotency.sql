-- The `Idempotency-Key` header of the operator API (IETF httpapi draft): the first request with a
-- key stores its answer; the same key with the same body gets that answer again, with another
-- body a 422, and while the first is still running a 409.
CREATE TABLE api_idempotency (
    tenant_id    TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status       BIGINT,                  -- NULL while the first request runs
    response     TEXT,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
