-- Fault-injection set-up and observation (`cronwire chaos` only; never used by serve).

-- name: chaos_now
SELECT now()

-- name: chaos_schedules_insert
-- $1 ids, $2 tenant, $3 cron, $4 target, $5 retry, $6 first fire, $7 ends_at, $8 secret.
-- ends_at bounds the run: the planner itself stops every schedule at the horizon.
INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
                      status, next_fire_at, ends_at, signing_secret)
SELECT id, $2, 'chaos-' || ord, $3, 'UTC', $4::jsonb, $5::jsonb, 'fire_all', 'active', $6, $7, $8
FROM unnest($1::uuid[]) WITH ORDINALITY AS s(id, ord)

-- name: chaos_burst_schedule_insert
-- A schedule the planner never fires (next_fire_at NULL): it only owns the burst's runs.
INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
                      status, next_fire_at, signing_secret)
VALUES ($1, $2, 'chaos-burst', '* * * * *', 'UTC', $3::jsonb, $4::jsonb, 'fire_all',
        'active', NULL, $5)

-- name: chaos_burst_runs_insert
-- $1 tenant, $2 schedule, $3 how many, $4 when they all fall due. Occurrences 1 ms apart
-- an hour back, so (schedule, scheduled_for) stays unique. Returns the run ids.
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, status,
                     fire_after)
SELECT md5($2::uuid::text || '/' || g::text)::uuid, $1, $2,
       date_trunc('second', now()) - interval '1 hour' + g * interval '1 millisecond',
       'msg_' || md5($2::uuid::text || '/' || g::text), 'pending', $4
  FROM generate_series(1, $3::integer) AS g
RETURNING id

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
SELECT id, lease_generation, attempt_count FROM job_run
WHERE status = 'running' AND claimed_by = $1

-- name: chaos_runs_state
SELECT id, status, claimed_by, lease_generation FROM job_run WHERE id = ANY($1::uuid[])

-- name: chaos_attempts_of_owner
-- Evidence rows an owner wrote for these runs (rows land only with a landed result).
SELECT run_id, attempt, started_at FROM job_run_attempt
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
