-- Load-test set-up and observation (the harness only; never used by serve).

-- name: loadtest_schedules_insert
-- ends_at bounds the test: the planner itself stops every schedule at the horizon.
-- $9 every schedule's jitter_seconds (--jitter-seconds).
INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
                      status, next_fire_at, ends_at, signing_secret, jitter_seconds)
SELECT id, $2, 'load-' || ord, $3, 'UTC', $4::jsonb, $5::jsonb, 'fire_all', 'active', $6, $7, $8,
       $9
FROM unnest($1::uuid[]) WITH ORDINALITY AS s(id, ord)

-- name: loadtest_unplanned
-- Schedules the planner has not yet moved past the horizon.
SELECT count(*) FROM schedule
WHERE tenant_id = $1 AND status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= $2

-- name: loadtest_now
SELECT now()

-- name: loadtest_unfinished
-- Runs up to the horizon that are not terminal yet.
SELECT count(*) FROM job_run
WHERE tenant_id = $1 AND scheduled_for <= $2
  AND status IN ('pending', 'running', 'retrying')

-- name: loadtest_run_counts
SELECT status, count(*) AS n FROM job_run
WHERE tenant_id = $1 AND scheduled_for <= $2
GROUP BY status

-- name: loadtest_unfinished_all
-- Runs up to the horizon not terminal yet, any tenant (the progress line's backlog).
SELECT count(*) FROM job_run
WHERE scheduled_for <= $1 AND status IN ('pending', 'running', 'retrying')

-- name: loadtest_materialised
-- Runs the planner has written up to the horizon (read once, at the first instant).
SELECT count(*) FROM job_run WHERE tenant_id = $1 AND scheduled_for <= $2

-- name: loadtest_last_planned_at
-- When the planner wrote the last run of the first instant: created_at is now() of the
-- planner transaction that wrote it (its start; the commit follows within the tick).
SELECT max(created_at) FROM job_run WHERE tenant_id = $1 AND scheduled_for = $2
