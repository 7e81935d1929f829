-- job_run_attempt: the evidence of each attempt (written by job_run_resolve, read here).
-- $1 is always tenant_id.

-- name: job_run_attempt_list
-- The run's evidence, pruned to its own partition by scheduled_for. Through the view
-- run_attempt (migration 0030): the rows of job_run_attempt and, for a run that ended
-- with its attempt, that attempt from the run's own row (each side by its primary key).
SELECT run_id, scheduled_for, tenant_id, attempt, started_at, finished_at, outcome,
       status_code, error, duration_ms, response_excerpt
FROM run_attempt
WHERE run_id = $2 AND scheduled_for = $3 AND tenant_id = $1
ORDER BY attempt
