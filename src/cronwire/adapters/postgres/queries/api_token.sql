-- api_token: the tenants' API tokens (hashes only).

-- name: api_token_insert
INSERT INTO api_token (token_hash, tenant_id, prefix) VALUES ($1, $2, $3)

-- name: api_token_tenant
SELECT t.id, t.name, k.token_hash
FROM api_token k JOIN tenant t ON t.id = k.tenant_id
WHERE k.token_hash = $1 AND k.revoked_at IS NULL

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
