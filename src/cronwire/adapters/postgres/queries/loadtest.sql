-- Load-test set-up and observation (the harness only; never used by serve).

-- name: loadtest_schedules_insert
INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
                      status, next_fire_at, signing_secret)
SELECT id, $2, 'load-' || ord, $3, 'UTC', $4::jsonb, $5::jsonb, 'fire_all', 'active', $6, $7
FROM unnest($1::uuid[]) WITH ORDINALITY AS s(id, ord)

-- name: loadtest_schedules_pause
UPDATE schedule SET status = 'paused', updated_at = now() WHERE tenant_id = $1

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
