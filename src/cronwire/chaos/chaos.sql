-- Fault-injection observation (`cronwire chaos` only; never used by serve). What it
-- writes is harness/seeding.sql's.

-- name: chaos_tenants
SELECT id FROM tenant

-- name: chaos_unplanned
-- Schedules of these tenants the planner has not moved past the horizon yet.
SELECT count(*) FROM schedule
WHERE tenant_id = ANY($1::uuid[]) AND status = 'active' AND next_fire_at IS NOT NULL
  AND next_fire_at <= $2

-- name: chaos_unfinished
-- Runs of these tenants up to the horizon that are not terminal yet.
SELECT count(*) FROM job_run
WHERE tenant_id = ANY($1::uuid[]) AND scheduled_for <= $2
  AND status IN ('pending', 'running', 'retrying')

-- name: chaos_run_counts
SELECT status, count(*) AS n FROM job_run WHERE tenant_id = ANY($1::uuid[]) GROUP BY status

-- name: chaos_leases_of_owner
-- The leases an owner holds right now: after a kill -9 or a SIGSTOP, its requests in flight.
SELECT id, lease_generation, attempt_count, extract(epoch FROM claim_expires_at) AS expires
FROM job_run
WHERE status = 'running' AND claimed_by = $1

-- name: chaos_runs_state
SELECT id, status, claimed_by, lease_generation FROM job_run WHERE id = ANY($1::uuid[])

-- name: chaos_attempts_of_owner
-- Evidence rows an owner wrote for these runs (rows land only with a landed result).
SELECT run_id, attempt, started_at FROM run_attempt
WHERE claimed_by = $1 AND run_id = ANY($2::uuid[])

-- name: chaos_final_owner
-- Who wrote each run's final result, for per-replica figures.
SELECT id, claimed_by FROM job_run WHERE tenant_id = ANY($1::uuid[]) AND status = 'succeeded'

-- name: chaos_lease_expiry
-- When each of these leases of owner $2 runs out (epoch seconds, the database's clock).
SELECT id, lease_generation, extract(epoch FROM claim_expires_at)::float8 AS expires
FROM job_run
WHERE id = ANY($1::uuid[]) AND status = 'running' AND claimed_by = $2

-- name: chaos_owner_runs_since
-- Runs an owner delivered to the end that fell due after $2: it works again.
SELECT count(*) FROM job_run
WHERE claimed_by = $1 AND status = 'succeeded' AND scheduled_for > $2

-- name: chaos_leases_held
-- Every lease held right now, whoever holds it: the requests in flight at a failover.
SELECT id, lease_generation, attempt_count FROM job_run WHERE status = 'running'

-- name: chaos_standby_behind_bytes
-- How much WAL the primary has written that its standby has not replayed yet: what an
-- asynchronous standby would lose if the primary died now (0 for a synchronous one, as
-- far as commits go: they wait for the standby).
SELECT coalesce(max(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), replay_lsn)), 0)::bigint
FROM pg_stat_replication

-- name: chaos_in_recovery
-- A standby until its promotion completes; then the new primary.
SELECT pg_is_in_recovery()

-- name: chaos_attempts_recorded
-- How many delivery attempts the database holds for each run of these tenants: after a
-- failover, a delivery the receiver saw but the new primary has no attempt for is one
-- whose outcome was lost with the old primary (or never written).
SELECT run_id, count(*) AS n FROM run_attempt WHERE tenant_id = ANY($1::uuid[])
GROUP BY run_id
