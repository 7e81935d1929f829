-- Tenants and their API tokens (hashes only).

-- name: tenant_insert
INSERT INTO tenant (id, name) VALUES ($1, $2)
RETURNING id, name, created_at

-- name: tenant_get
SELECT id, name, max_schedules, min_interval_seconds, max_body_bytes, max_headers, created_at
FROM tenant WHERE id = $1

-- name: api_token_insert
INSERT INTO api_token (token_hash, tenant_id) VALUES ($1, $2)

-- name: api_token_tenant
SELECT t.id, t.name, k.token_hash
FROM api_token k JOIN tenant t ON t.id = k.tenant_id
WHERE k.token_hash = $1 AND k.revoked_at IS NULL
