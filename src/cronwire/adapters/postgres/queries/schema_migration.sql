-- schema_migration: the migrator's ledger, one row per applied migration file.

-- name: schema_migration_exists
SELECT to_regclass('schema_migration') IS NOT NULL

-- name: schema_migration_list
SELECT version, checksum FROM schema_migration

-- name: schema_migration_create
CREATE TABLE IF NOT EXISTS schema_migration (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: schema_migration_insert
INSERT INTO schema_migration (version, name, checksum) VALUES ($1, $2, $3)
