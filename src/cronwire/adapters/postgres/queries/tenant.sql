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
RETURNING id, name, max_concurrency, max_pending_runs

-- name: tenant_set_max_pending_runs
-- The tenant's own cap on its runs not yet ended (NULL: SCHEDULER_TENANT_MAX_PENDING_RUNS).
-- Backfill, replay and trigger requests read it as they add runs.
UPDATE tenant SET max_pending_runs = $2 WHERE id = $1
RETURNING id, name, max_concurrency, max_pending_runs

-- name: tenant_lock_volume
-- Serialises one tenant's requests that add runs outside the planner (backfill, replay,
-- trigger), on every replica, until the transaction ends: two of them cannot both see
-- room and together overshoot the limit. A statement of its own, before the count: under
-- READ COMMITTED the count's snapshot is then taken with the lock held, so it sees the
-- runs the previous holder committed. The two-integer form is a key space apart from the
-- one-bigint locks of the migrator and the partition keeper; two tenants whose ids share
-- a hash only wait for each other's short transactions. $1 tenant, $2 the key class.
-- Also tenant_count_plan's setting, for the count that follows.
SELECT pg_advisory_xact_lock($2::integer, hashtext($1::uuid::text)),
       set_config('plan_cache_mode', 'force_custom_plan', true)

-- name: tenant_count_plan
-- For the rest of the transaction, tenant_open_runs is planned for the tenant it counts.
-- A prepared statement's generic plan is planned for the average tenant: after a big
-- tenant's counts it was a sequential scan of job_run, which then cost a tenant with no
-- run as much as the biggest (measured: 48 ms over 200,000 runs, against 4 ms through
-- the index). Planned for the value, a small tenant's count walks its few index entries.
SELECT set_config('plan_cache_mode', 'force_custom_plan', true)

-- name: tenant_open_runs
-- The tenant's runs not yet ended, counted up to its limit and no further (the tenant's
-- own max_pending_runs, else $2, the configured default): a LIMIT-ed walk of
-- job_run_tenant_status_history_idx (tenant_id, status, ...), one range per status, so
-- the cost is bounded by the limit and touches only this tenant's entries. $1, not t.id:
-- planned for the tenant's own value (tenant_count_plan), not for an outer row's.
SELECT COALESCE(t.max_pending_runs, $2::integer) AS max_pending_runs,
       t.max_pending_runs IS NOT NULL AS own,
       (SELECT count(*) FROM (
            SELECT 1 FROM job_run r
             WHERE r.tenant_id = $1 AND r.status IN ('pending', 'running', 'retrying')
             LIMIT COALESCE(t.max_pending_runs, $2::integer)) AS o) AS counted
  FROM tenant t WHERE t.id = $1

-- name: tenant_lock_tokens
-- Serialises one tenant's token issues, so two cannot both see room under the live-token cap.
SELECT id, name FROM tenant WHERE id = $1 FOR NO KEY UPDATE
