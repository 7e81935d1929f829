-- tenant: the tenants, their limits and the operators' overview.

-- name: tenant_insert
INSERT INTO tenant (id, name) VALUES ($1, $2)
RETURNING id, name, created_at

-- name: tenant_get
SELECT id, name, max_schedules, min_interval_seconds, max_body_bytes, max_headers, created_at
FROM tenant WHERE id = $1

-- name: tenant_list
-- Operators' overview: live schedules (not deleted) and live tokens (not revoked) per tenant.
SELECT t.id, t.name, t.created_at,
       (SELECT count(*) FROM schedule s
         WHERE s.tenant_id = t.id AND s.status <> 'deleted') AS schedules,
       (SELECT count(*) FROM api_token k
         WHERE k.tenant_id = t.id AND k.revoked_at IS NULL) AS live_tokens
FROM tenant t
ORDER BY t.created_at, t.id

-- name: tenant_limits_now
-- NULL columns mean "the configured default"; now() anchors validation on the DB clock.
SELECT max_schedules, min_interval_seconds, max_body_bytes, max_headers, now() AS db_now
FROM tenant WHERE id = $1

-- name: tenant_lock_live_count
-- Locking the tenant row serialises concurrent creates of one tenant, so two requests
-- cannot both see "one slot left" and both take it.
SELECT t.id, now() AS db_now,
       (SELECT count(*) FROM schedule s
        WHERE s.tenant_id = t.id AND s.status <> 'deleted') AS live
FROM tenant t WHERE t.id = $1
FOR UPDATE OF t

-- name: tenant_set_max_concurrency
-- The tenant's own cap on requests in flight (NULL: SCHEDULER_TENANT_MAX_CONCURRENCY).
-- Claims read it as they admit runs (ADR 0040): it applies to runs claimed after this.
UPDATE tenant SET max_concurrency = $2 WHERE id = $1
RETURNING id, name, max_concurrency
