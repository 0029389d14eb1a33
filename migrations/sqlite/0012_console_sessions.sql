-- The operator console's sessions. A browser holds only a random session id in an HttpOnly
-- cookie; this row holds its SHA-256 (a copied database opens no session), the principal the
-- bearer token proved at sign-in, the form token every change must carry (CSRF), and when it
-- ends. Signing out deletes the row.
CREATE TABLE console_sessions (
    id_hash    TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    issuer     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    scopes     TEXT NOT NULL,             -- space-separated, as the token granted them
    csrf_token TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
