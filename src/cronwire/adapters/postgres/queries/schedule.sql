-- Schedules as tenants edit them through the API. Every statement is confined to one
-- tenant ($1 is always tenant_id): a foreign id matches no row and reads as "not found".
-- Deleted schedules are invisible here; their runs stay readable in run_history.sql.

-- name: tenant_limits_now
-- NULL columns mean "the configured default"; now() anchors validation on the DB clock.
SELECT max_schedules, min_interval_seconds, max_body_bytes, max_headers, now() AS db_now
FROM tenant WHERE id = $1

-- name: db_now
SELECT now()

-- name: tenant_lock_live_count
-- Locking the tenant row serialises concurrent creates of one tenant, so two requests
-- cannot both see "one slot left" and both take it.
SELECT t.id, now() AS db_now,
       (SELECT count(*) FROM schedule s
        WHERE s.tenant_id = t.id AND s.status <> 'deleted') AS live
FROM tenant t WHERE t.id = $1
FOR UPDATE OF t

-- name: schedule_insert
INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
                      catchup_window_seconds, status, next_fire_at, starts_at, ends_at,
                      signing_secret)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
RETURNING id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
          catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
          signing_secret, previous_secret_expires_at, created_at, updated_at

-- name: schedule_get
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at
FROM schedule
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'

-- name: schedule_lock
-- The row an edit rewrites, locked against the planner advancing it meanwhile (the
-- planner's SKIP LOCKED passes over it until we commit), with the clock of this edit.
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at, now() AS db_now
FROM schedule
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
FOR UPDATE

-- name: schedule_list
-- Keyset on schedule_tenant_idx (tenant_id, id); $2 is the last id of the previous page.
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at
FROM schedule
WHERE tenant_id = $1 AND id > $2 AND status <> 'deleted'
ORDER BY id
LIMIT $3

-- name: schedule_update
UPDATE schedule
SET name = $3, cron = $4, timezone = $5, target = $6, retry = $7, misfire_policy = $8,
    catchup_window_seconds = $9, starts_at = $10, ends_at = $11, next_fire_at = $12,
    updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
RETURNING id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
          catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
          signing_secret, previous_secret_expires_at, created_at, updated_at

-- name: schedule_set_status
-- Pause/resume. next_fire_at is left alone on purpose: after a resume the planner finds
-- the schedule overdue and its misfire policy decides about the missed occurrences.
UPDATE schedule
SET status = $3, updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
RETURNING id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
          catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
          signing_secret, previous_secret_expires_at, created_at, updated_at

-- name: schedule_rotate_secret
-- Two slots only: rotating again within the overlap drops the oldest secret.
UPDATE schedule
SET previous_signing_secret = signing_secret,
    previous_secret_expires_at = now() + make_interval(secs => $4),
    signing_secret = $3,
    updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
RETURNING id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
          catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
          signing_secret, previous_secret_expires_at, created_at, updated_at

-- name: schedule_soft_delete
UPDATE schedule
SET status = 'deleted', deleted_at = now(), next_fire_at = NULL, updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
RETURNING id

-- name: job_run_cancel_for_schedule
-- Runs not yet started of a deleted schedule are cancelled. A leased (running) run is
-- left to finish its request, which may already be on the wire, but is marked
-- cancel_requested: its result is recorded, and instead of a retry, a release or a
-- re-claim of its lease it ends 'cancelled' (executor.sql), so no attempt starts after
-- the delete. One UPDATE for both on purpose: it waits for a claim or a resolve that
-- holds a row, then re-checks the row as that transaction left it, so a run that turned
-- 'running' or 'retrying' meanwhile is caught either way. Counts both kinds of run.
UPDATE job_run
SET status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,
    finished_at = CASE WHEN status = 'running' THEN finished_at ELSE now() END,
    cancel_requested = true,
    updated_at = now()
WHERE tenant_id = $1 AND schedule_id = $2 AND status IN ('pending', 'retrying', 'running')

-- name: schedule_lock_live
-- FOR SHARE: a concurrent delete waits for the manual run to commit, then cancels it.
SELECT id FROM schedule
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
FOR SHARE

-- name: job_run_manual_instant
-- Cron occurrences are whole seconds; a manual run's instant never is (a whole-second
-- clock reading is nudged by 1 µs), so it cannot take an occurrence's (schedule_id,
-- scheduled_for) slot. clock_timestamp(), not now(): a retry must see a new instant.
SELECT CASE WHEN date_trunc('second', t) = t THEN t + interval '1 microsecond' ELSE t END
FROM clock_timestamp() AS t

-- name: job_run_insert_manual
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, trigger,
                     status, fire_after)
VALUES ($1, $2, $3, $4, $5, 'manual', 'pending', $4)
ON CONFLICT DO NOTHING
RETURNING id, schedule_id, scheduled_for, status, attempt_count, fire_after,
          first_attempt_at, finished_at, last_status_code, last_error, trigger
