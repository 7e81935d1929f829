-- Load-test observation (the harness only; never used by serve). What it writes is
-- harness/seeding.sql's.

-- name: loadtest_unplanned
-- Schedules the planner has not yet moved past the horizon.
SELECT count(*) FROM schedule
WHERE tenant_id = $1 AND status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= $2

-- name: loadtest_unfinished
-- Runs up to the horizon that are not terminal yet.
SELECT count(*) FROM job_run
WHERE tenant_id = $1 AND scheduled_for <= $2
  AND status IN ('pending', 'running', 'retrying')

-- name: loadtest_run_counts
SELECT status, count(*) AS n FROM job_run
WHERE tenant_id = $1 AND scheduled_for <= $2
GROUP BY status

-- name: loadtest_materialised
-- Runs the planner has written up to the horizon (read once, at the first instant).
SELECT count(*) FROM job_run WHERE tenant_id = $1 AND scheduled_for <= $2

-- name: loadtest_last_planned_at
-- When the planner wrote the last run of the first instant: created_at is now() of the
-- planner transaction that wrote it (its start; the commit follows within the tick).
SELECT max(created_at) FROM job_run WHERE tenant_id = $1 AND scheduled_for = $2
