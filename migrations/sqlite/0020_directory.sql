-- The directory as data: each tenant's roles, its people and the addresses they write from.
-- `source` says who owns a row: `file` (seeded from directory.toml, which updates it on start and
-- on reload) or `api` (made or changed through the operator API or an import: the database wins).
CREATE TABLE directory_roles (
    tenant_id  TEXT NOT NULL,
    name       TEXT NOT NULL,
    scopes     TEXT NOT NULL,              -- JSON array of scopes
    source     TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE directory_people (
    tenant_id  TEXT NOT NULL,
    actor_id   TEXT NOT NULL,
    name       TEXT NOT NULL,
    roles      TEXT NOT NULL,              -- JSON array of role names
    locale     TEXT,
    active     BIGINT NOT NULL,            -- 1 or 0
    source     TEXT NOT NULL,
    version    BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, actor_id)
);
CREATE INDEX directory_people_by_name ON directory_people (tenant_id, name);

-- One row per address: an address names one person of a tenant.
CREATE TABLE directory_addresses (
    tenant_id TEXT NOT NULL,
    address   TEXT NOT NULL,
    kind      TEXT NOT NULL,
    actor_id  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, address)
);
CREATE INDEX directory_addresses_by_person ON directory_addresses (tenant_id, actor_id);
