-- api_token: the tenants' API tokens (hashes only), their scope, name and expiry.

-- name: api_token_insert
INSERT INTO api_token (token_hash, tenant_id, prefix, scope, name, expires_at)
VALUES ($1, $2, $3, coalesce($4, 'admin'), $5, $6)
RETURNING id, tenant_id, prefix, name, scope, created_at, expires_at, last_used_at, revoked_at

-- name: api_token_grant
-- What a bearer token grants, read on every request (uncached: a revocation takes effect
-- on every replica with the next request). `expired` and `use_due` are decided on the
-- database's clock: the token's expiry, and whether last_used_at is a minute old.
SELECT id, tenant_id, token_hash, name, scope, expires_at,
       expires_at IS NOT NULL AND expires_at <= now() AS expired,
       last_used_at IS NULL OR last_used_at < now() - interval '1 minute' AS use_due
  FROM api_token
 WHERE token_hash = $1 AND revoked_at IS NULL

-- name: api_token_touch
-- last_used_at of the tokens in $1, at most once a minute each (any replica).
UPDATE api_token SET last_used_at = now()
 WHERE id = ANY ($1::uuid[])
   AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')

-- name: api_token_list
SELECT id, tenant_id, prefix, name, scope, created_at, expires_at, last_used_at, revoked_at
FROM api_token WHERE tenant_id = $1
ORDER BY created_at, id

-- name: api_token_list_live
-- GET /v1/tokens: the tenant's unrevoked tokens (at most MAX_LIVE_TOKENS exist).
SELECT id, tenant_id, prefix, name, scope, created_at, expires_at, last_used_at, revoked_at
FROM api_token WHERE tenant_id = $1 AND revoked_at IS NULL
ORDER BY created_at, id

-- name: api_token_count_live
SELECT count(*) FROM api_token WHERE tenant_id = $1 AND revoked_at IS NULL

-- name: api_token_revoke
-- Idempotent: revoking a revoked token keeps its first revocation time. `was_live` says
-- whether this statement revoked it (an audit row is written only then).
UPDATE api_token k SET revoked_at = coalesce(k.revoked_at, now())
  FROM api_token before
 WHERE k.id = $1 AND before.id = k.id
RETURNING k.id, k.tenant_id, k.prefix, k.name, k.scope, k.created_at, k.expires_at,
          k.last_used_at, k.revoked_at, before.revoked_at IS NULL AS was_live

-- name: api_token_revoke_own
-- A tenant revoking one of its own tokens (DELETE /v1/tokens/{id}); another tenant's id
-- matches nothing.
UPDATE api_token k SET revoked_at = coalesce(k.revoked_at, now())
  FROM api_token before
 WHERE k.tenant_id = $1 AND k.id = $2 AND before.id = k.id
RETURNING k.id, k.tenant_id, k.prefix, k.name, k.scope, k.created_at, k.expires_at,
          k.last_used_at, k.revoked_at, before.revoked_at IS NULL AS was_live
