-- The tenant-facing run history (reads only). $1 is always tenant_id.
--
-- Pages are newest scheduled_for first with a keyset on (scheduled_for, id). Bounds are
-- always concrete values (the adapter passes -infinity/+infinity-like sentinels for
-- "no bound"), never "$n IS NULL OR ...", so the planner can prune monthly partitions:
-- at plan time with a custom plan, at executor start-up with a generic one.
--   $2 since (inclusive)   $3 until (exclusive)
--   $4, $5 the previous page's last (scheduled_for, id); "scheduled_for <= $4" repeats
--   the row comparison in a form partition pruning understands.   $6 limit   $7 status

-- name: run_list_for_tenant
-- job_run_tenant_history_idx (tenant_id, scheduled_for DESC, id DESC).
SELECT id, schedule_id, scheduled_for, status, attempt_count, fire_after,
       first_attempt_at, finished_at, last_status_code, last_error, trigger
FROM job_run
WHERE tenant_id = $1
  AND scheduled_for >= $2 AND scheduled_for < $3
  AND scheduled_for <= $4 AND (scheduled_for, id) < ($4, $5)
ORDER BY scheduled_for DESC, id DESC
LIMIT $6

-- name: run_list_for_tenant_status
-- job_run_tenant_status_history_idx (tenant_id, status, scheduled_for DESC, id DESC).
SELECT id, schedule_id, scheduled_for, status, attempt_count, fire_after,
       first_attempt_at, finished_at, last_status_code, last_error, trigger
FROM job_run
WHERE tenant_id = $1 AND status = $7
  AND scheduled_for >= $2 AND scheduled_for < $3
  AND scheduled_for <= $4 AND (scheduled_for, id) < ($4, $5)
ORDER BY scheduled_for DESC, id DESC
LIMIT $6

-- name: run_list_for_schedule
-- The occurrence key (schedule_id, scheduled_for), read backwards. scheduled_for is
-- unique within a schedule, so it alone orders the page exactly as (scheduled_for, id)
-- does, and the keyset is "scheduled_for < $4", an index condition on that key (the id
-- half of the cursor is not needed). The status filter is a plain filter here: one
-- schedule's history is the bounded set it walks.
--   $5 limit   $6 status or NULL   $7 schedule_id
SELECT id, schedule_id, scheduled_for, status, attempt_count, fire_after,
       first_attempt_at, finished_at, last_status_code, last_error, trigger
FROM job_run
WHERE schedule_id = $7 AND tenant_id = $1
  AND scheduled_for >= $2 AND scheduled_for < $3 AND scheduled_for < $4
  AND ($6::text IS NULL OR status = $6::text)
ORDER BY scheduled_for DESC
LIMIT $5

-- name: run_get
-- By id alone: one primary-key probe per partition (the id does not say which month).
SELECT id, schedule_id, scheduled_for, status, attempt_count, fire_after,
       first_attempt_at, finished_at, last_status_code, last_error, trigger
FROM job_run
WHERE id = $2 AND tenant_id = $1

-- name: run_attempts
-- The run's evidence, pruned to its own partition by scheduled_for.
SELECT run_id, scheduled_for, tenant_id, attempt, started_at, finished_at, outcome,
       status_code, error, duration_ms, response_excerpt
FROM job_run_attempt
WHERE run_id = $2 AND scheduled_for = $3 AND tenant_id = $1
ORDER BY attempt
