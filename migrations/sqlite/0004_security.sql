-- Step-up tokens are used once: a token's (issuer, jti) is recorded in the transaction of the move
-- it allows, so a second use, even a concurrent one, finds it taken. Rows outlive the token's
-- expiry only until the cleanup worker removes them (an expired token is refused anyway).
CREATE TABLE consumed_tokens (
    issuer      TEXT NOT NULL,
    jti         TEXT NOT NULL,
    command_id  TEXT NOT NULL,
    consumed_at BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (issuer, jti)
);
CREATE INDEX consumed_tokens_by_expiry ON consumed_tokens (expires_at);
