-- Tenants and their API tokens (hashes only).

-- name: tenant_insert
INSERT INTO tenant (id, name) VALUES ($1, $2)
RETURNING id, name, created_at

-- name: tenant_get
SELECT id, name, max_schedules, min_interval_seconds, max_body_bytes, max_headers, created_at
FROM tenant WHERE id = $1

-- name: api_token_insert
INSERT INTO api_token (token_hash, tenant_id, prefix) VALUES ($1, $2, $3)

-- name: api_token_tenant
SELECT t.id, t.name, k.token_hash
FROM api_token k JOIN tenant t ON t.id = k.tenant_id
WHERE k.token_hash = $1 AND k.revoked_at IS NULL

-- name: tenant_list
-- Operators' overview: live schedules (not deleted) and live tokens (not revoked) per tenant.
SELECT t.id, t.name, t.created_at,
       (SELECT count(*) FROM schedule s
         WHERE s.tenant_id = t.id AND s.status <> 'deleted') AS schedules,
       (SELECT count(*) FROM api_token k
         WHERE k.tenant_id = t.id AND k.revoked_at IS NULL) AS live_tokens
FROM tenant t
ORDER BY t.created_at, t.id

-- name: api_token_list
SELECT id, tenant_id, prefix, created_at, revoked_at
FROM api_token WHERE tenant_id = $1
ORDER BY created_at, id

-- name: api_token_revoke
-- Idempotent: revoking a revoked token keeps its first revocation time. The token lookup
-- (api_token_tenant) reads revoked_at on every request, uncached, so this takes effect
-- on every replica with the next request.
UPDATE api_token SET revoked_at = coalesce(revoked_at, now())
WHERE id = $1
RETURNING id, tenant_id, prefix, created_at, revoked_at
