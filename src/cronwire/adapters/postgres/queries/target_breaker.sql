-- Circuit breakers per (tenant, target origin); transitions are decided in
-- cronwire.domain.breaker, these statements read, lock and write them.

-- name: target_breaker_open_states
-- $1 tenant ids, $2 target keys (pairwise). Postgres now() and every non-closed breaker
-- among them; a single row of NULLs besides now() when all are closed.
SELECT now() AS db_now, b.tenant_id, b.target_key, b.state, b.failures, b.opened_until,
       b.probe_by, b.probe_expires_at
  FROM (SELECT 1) AS one
  LEFT JOIN (target_breaker b
             JOIN unnest($1::uuid[], $2::text[]) AS k(tenant_id, target_key)
               ON b.tenant_id = k.tenant_id AND b.target_key = k.target_key)
    ON b.state <> 'closed'

-- name: target_breaker_try_probe
-- $1 tenant, $2 key, $3 owner, $4 probe seconds. One winner among concurrent replicas:
-- the row lock serialises them and the loser's re-checked WHERE no longer matches.
UPDATE target_breaker
   SET state = 'half_open', probe_by = $3, probe_expires_at = now() + make_interval(secs => $4),
       updated_at = now()
 WHERE tenant_id = $1 AND target_key = $2
   AND ((state = 'open' AND opened_until <= now())
        OR (state = 'half_open' AND (probe_expires_at IS NULL OR probe_expires_at <= now())))
RETURNING tenant_id

-- name: target_breaker_dirty
-- Which of these keys have anything a success would reset (not closed, or failures
-- counted). Read-only: the common all-success batch on healthy targets writes nothing.
SELECT b.tenant_id, b.target_key
  FROM target_breaker b
  JOIN unnest($1::uuid[], $2::text[]) AS k(tenant_id, target_key)
    ON b.tenant_id = k.tenant_id AND b.target_key = k.target_key
 WHERE b.state <> 'closed' OR b.failures > 0

-- name: target_breaker_ensure
-- Rows for keys about to record a failure (a success on a missing row changes nothing).
INSERT INTO target_breaker (tenant_id, target_key)
SELECT * FROM unnest($1::uuid[], $2::text[])
ON CONFLICT DO NOTHING

-- name: target_breaker_lock
-- In a fixed order, so two replicas feeding overlapping keys cannot deadlock.
SELECT now() AS db_now, b.tenant_id, b.target_key, b.state, b.failures, b.opened_until,
       b.probe_by, b.probe_expires_at
  FROM target_breaker b
  JOIN unnest($1::uuid[], $2::text[]) AS k(tenant_id, target_key)
    ON b.tenant_id = k.tenant_id AND b.target_key = k.target_key
 ORDER BY b.tenant_id, b.target_key
   FOR UPDATE OF b

-- name: target_breaker_write
UPDATE target_breaker b
   SET state = n.state, failures = n.failures, opened_until = n.opened_until,
       probe_by = n.probe_by, probe_expires_at = n.probe_expires_at, updated_at = now()
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::integer[], $5::timestamptz[],
              $6::text[], $7::timestamptz[])
       AS n(tenant_id, target_key, state, failures, opened_until, probe_by, probe_expires_at)
 WHERE b.tenant_id = n.tenant_id AND b.target_key = n.target_key

-- name: target_breaker_open_count
SELECT count(*) FROM target_breaker WHERE state <> 'closed'
