-- Link codes (issue #48): a listed person's one-time code for linking another channel or number
-- to their directory entry ("link K7M2QX9P" sent from the new address). The code itself is never
-- kept, only its keyed hash (`code_hash`, the evidence pseudonymizer's HMAC of tenant and code),
-- so that reading this table gives nobody a code. A code is used once (`used_at`, `used_by`: the
-- address it linked), only before `expires_at`; a link the person undid ("not you? reply STOP")
-- has `undone_at`. A row is forgotten by the clean-up after `keep_until`: its expiry while
-- unused, the end of the window in which its link can be undone once used.
CREATE TABLE link_codes (
    code_hash  TEXT NOT NULL PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    person_id  TEXT NOT NULL,
    issued_at  BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT,
    used_kind  TEXT,
    used_by    TEXT,
    undone_at  BIGINT,
    keep_until BIGINT NOT NULL
);
-- A person's pending codes (at most a few) and the link they may still undo.
CREATE INDEX link_codes_by_person ON link_codes (tenant_id, person_id);
-- The clean-up forgets what is past keeping (`store::link_codes::FORGET_KEPT`).
CREATE INDEX link_codes_keep ON link_codes (keep_until);
