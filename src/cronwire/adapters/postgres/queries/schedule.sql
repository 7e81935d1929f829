-- schedule: the planner's claim and advance (one transaction with job_run_insert_planned,
-- PostgresPlannerStore.plan_on; each is one round trip), then the schedules as tenants
-- edit them through the API. Every API statement is confined to one tenant ($1 is always
-- tenant_id): a foreign id matches no row and reads as "not found". Deleted schedules are
-- invisible to the API; their runs stay readable (job_run.sql's history).

-- name: schedule_claim_due
-- $1 lookahead seconds, $2 batch size. now() is the only clock: it is the transaction's
-- start time, returned so the pure planner decides with exactly the instant used here.
SELECT id, tenant_id, cron, timezone, misfire_policy, catchup_window_seconds,
       next_fire_at, last_fire_at, starts_at, ends_at, run_at, overlap_policy,
       jitter_seconds, max_runs, runs_planned, flow_key, exclude_calendars, calendar_policy,
       resumed_at, now() AS db_now
FROM schedule
WHERE status = 'active' AND next_fire_at <= now() + make_interval(secs => $1)
ORDER BY next_fire_at
LIMIT $2
FOR UPDATE SKIP LOCKED

-- name: schedule_claim_ahead
-- The idle planner's early pass: schedules due after the look-ahead ($1 s) but within
-- $3 s, that fire at most once per $3 s (their next fire is at least $3 s after the last
-- one, or they never fired). Their next occurrence is written now, while nothing is due,
-- instead of all at once when the look-ahead reaches a shared instant (100,000 schedules
-- on "0 * * * *"). Frequent schedules are left to the look-ahead, so they never have
-- more than the look-ahead's runs written ahead: this filter keeps out those whose last
-- fire shows it, and the pure decide_ahead passes over the rest (a schedule that never
-- fired, or a pair of fires close together) by its cron. $2 batch size. Same lock as the
-- claim.
SELECT id, tenant_id, cron, timezone, misfire_policy, catchup_window_seconds,
       next_fire_at, last_fire_at, starts_at, ends_at, run_at, overlap_policy,
       jitter_seconds, max_runs, runs_planned, flow_key, exclude_calendars, calendar_policy,
       resumed_at, now() AS db_now
FROM schedule
WHERE status = 'active'
  AND next_fire_at > now() + make_interval(secs => $1)
  AND next_fire_at <= now() + make_interval(secs => $3)
  AND (last_fire_at IS NULL OR next_fire_at - last_fire_at >= make_interval(secs => $3))
ORDER BY next_fire_at
LIMIT $2
FOR UPDATE SKIP LOCKED

-- name: schedule_advance
-- The cursors of the claimed (still locked) schedules; NULL next_fire_at = no more fires.
-- updated_at is the tenant's edit time, so the planner leaves it alone. The redundant
-- "id = ANY($1)" lets Postgres fetch the batch by primary key instead of hashing a scan of
-- the whole table (it cannot see through the join on unnest), so cost follows the batch,
-- not the number of schedules. $4 the scheduled occurrences written (runs_planned, for
-- max_runs), $5 NULL or the ids whose last occurrence this pass wrote: completed. Both
-- under the planner's row lock, so max_runs is exact however many replicas plan.
UPDATE schedule AS s
SET next_fire_at = a.next_fire_at,
    last_fire_at = a.last_fire_at,
    runs_planned = s.runs_planned + a.planned,
    status = CASE WHEN s.id = ANY($5::uuid[]) THEN 'completed' ELSE s.status END
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::integer[])
     AS a(id, next_fire_at, last_fire_at, planned)
WHERE s.id = a.id AND s.id = ANY($1::uuid[])

-- name: schedule_insert
-- $3..$9, $15..$19, $20..$22 and $23..$24 in ScheduleStore's spec column order (name ..
-- catchup_window_seconds, run_at .. pause_after_failures, the alert rules, key and
-- managed_by), $25..$26 the calendars (exclude_calendars, calendar_policy); paused_at is
-- set when it is created paused. A key another live schedule
-- of the tenant holds violates schedule_tenant_key_idx (the store answers 409).
INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
                      catchup_window_seconds, status, next_fire_at, starts_at, ends_at,
                      signing_secret, run_at, overlap_policy, jitter_seconds, max_runs,
                      pause_after_failures, alert_after_failures, alert_late_after_seconds,
                      alert_max_duration_ms, key, managed_by, paused_at, exclude_calendars,
                      calendar_policy)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
        $20, $21, $22, $23, $24, CASE WHEN $10 = 'paused' THEN now() END, $25, $26)
RETURNING id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
          catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
          signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
          overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
          consecutive_failures, paused_reason, paused_at,
          alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy

-- name: schedule_get
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
       overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
       consecutive_failures, paused_reason, paused_at,
       alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy
FROM schedule
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'

-- name: schedule_lock
-- The row an edit rewrites, locked against the planner advancing it meanwhile (the
-- planner's SKIP LOCKED passes over it until we commit), with the clock of this edit.
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
       overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
       consecutive_failures, paused_reason, paused_at,
       alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy, now() AS db_now
FROM schedule
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
FOR UPDATE

-- name: schedule_get_by_key
-- The tenant's live schedule with this key (schedule_tenant_key_idx: at most one).
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
       overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
       consecutive_failures, paused_reason, paused_at,
       alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy
FROM schedule
WHERE tenant_id = $1 AND key = $2 AND status <> 'deleted'

-- name: schedule_list_for_apply
-- What an apply compares with (ADR 0057): the tenant's live schedules with one of the
-- keys listed ($2), and, when it prunes, those managed by $3 (NULL: none). Not locked:
-- the caller holds the tenant's lock against other applies and creates, and locks each
-- row it is about to change (schedule_lock); an unchanged schedule is only read.
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
       overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
       consecutive_failures, paused_reason, paused_at,
       alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy
FROM schedule
WHERE tenant_id = $1 AND status <> 'deleted'
  AND (key = ANY ($2::text[]) OR managed_by = $3::text)

-- name: schedule_list
-- Keyset on schedule_tenant_idx (tenant_id, id); $2 is the last id of the previous page.
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
       overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
       consecutive_failures, paused_reason, paused_at,
       alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy
FROM schedule
WHERE tenant_id = $1 AND id > $2 AND status <> 'deleted'
ORDER BY id
LIMIT $3

-- name: schedule_update
-- $14..$18 run_at .. pause_after_failures; $19 the status after the edit (a completed
-- schedule given another occurrence is active again); $23, $24 key and managed_by; $25,
-- $26 exclude_calendars and calendar_policy.
UPDATE schedule
SET name = $3, cron = $4, timezone = $5, target = $6, retry = $7, misfire_policy = $8,
    catchup_window_seconds = $9, starts_at = $10, ends_at = $11, next_fire_at = $12,
    last_fire_at = $13, run_at = $14, overlap_policy = $15, jitter_seconds = $16,
    max_runs = $17, pause_after_failures = $18, status = $19,
    alert_after_failures = $20, alert_late_after_seconds = $21, alert_max_duration_ms = $22,
    key = $23, managed_by = $24, exclude_calendars = $25, calendar_policy = $26,
    -- a rule removed or changed starts its state afresh (no stale "failing" to recover)
    alert_failing = alert_failing AND $20::integer IS NOT DISTINCT FROM alert_after_failures,
    alert_told_failing = alert_told_failing
                         AND $20::integer IS NOT DISTINCT FROM alert_after_failures,
    alert_slow = alert_slow AND $22::integer IS NOT DISTINCT FROM alert_max_duration_ms,
    alert_late = alert_late AND $21::integer IS NOT DISTINCT FROM alert_late_after_seconds,
    updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
RETURNING id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
          catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
          signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
          overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
          consecutive_failures, paused_reason, paused_at,
          alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy

-- name: schedule_set_status
-- Pause/resume of an active or paused schedule (a completed one is neither: the store
-- answers that). next_fire_at is left alone on purpose: after a resume the planner finds
-- the schedule overdue and its misfire policy decides about the missed occurrences (a
-- pause also takes back what was written ahead: schedule_rewind). $4 the pause note
-- (paused_reason); a resume clears the note and the failure count that may have paused it.
-- $5 the instant a resume counted its missed runs at (NULL: now()): the planner judges
-- the missed occurrences at it (resumed_at, migration 0031), so it writes what was counted.
UPDATE schedule
SET status = $3, updated_at = now(),
    resumed_at = CASE WHEN $3 = 'active' AND status = 'paused'
                      THEN COALESCE($5::timestamptz, now()) ELSE resumed_at END,
    -- Pausing a paused schedule again keeps when it paused, and its reason unless a
    -- new note is given.
    paused_reason = CASE WHEN $3 = 'paused'
                         THEN COALESCE($4::text, CASE WHEN status = 'paused' THEN paused_reason END)
                    END,
    paused_at = CASE WHEN $3 = 'paused'
                     THEN CASE WHEN status = 'paused' THEN COALESCE(paused_at, now()) ELSE now() END
                END,
    consecutive_failures = CASE WHEN $3 = 'paused' THEN consecutive_failures ELSE 0 END
WHERE tenant_id = $1 AND id = $2 AND status IN ('active', 'paused')
RETURNING id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
          catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
          signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
          overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
          consecutive_failures, paused_reason, paused_at,
          alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy

-- name: schedule_rewind
-- After a pause took back occurrences written ahead (job_run_unplan_ahead): the cursor
-- back to the first of them ($3), so a resume before it plans it again (and one after it
-- leaves it to the misfire policy); $4 the last occurrence still written before it.
UPDATE schedule
SET next_fire_at = LEAST(next_fire_at, $3), last_fire_at = $4
WHERE tenant_id = $1 AND id = $2
RETURNING id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
          catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
          signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
          overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
          consecutive_failures, paused_reason, paused_at,
          alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy

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
          signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
          overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
          consecutive_failures, paused_reason, paused_at,
          alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy

-- name: schedule_soft_delete
UPDATE schedule
SET status = 'deleted', deleted_at = now(), next_fire_at = NULL, updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
RETURNING id

-- name: schedule_lock_live
-- FOR SHARE: a concurrent delete waits for the manual run to commit, then cancels it.
SELECT id FROM schedule
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
FOR SHARE

-- name: schedule_share
-- A schedule read to make runs of (backfill), held FOR SHARE until the runs are written:
-- a concurrent delete waits, then cancels them. With the clock of the transaction.
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
       overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
       consecutive_failures, paused_reason, paused_at,
       alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy, now() AS db_now
FROM schedule
WHERE tenant_id = $1 AND id = $2 AND status <> 'deleted'
FOR SHARE

-- name: schedule_share_live
-- The live ones of these schedules ($2), held FOR SHARE while their replays are written
-- (a concurrent delete waits, then cancels them). Ordered, so two callers lock alike.
SELECT id FROM schedule
WHERE tenant_id = $1 AND id = ANY ($2::uuid[]) AND status <> 'deleted'
ORDER BY id
FOR SHARE

-- name: schedule_release_gates_before
-- After retention dropped run partitions: an overlap gate held by a run older than the
-- oldest partition left ($1) can never see that run end (its row is gone), so the gate is
-- released. Run once per drop (monthly), never on a hot path.
UPDATE schedule SET overlap_run = NULL, overlap_run_at = NULL
WHERE overlap_run_at < $1

-- name: schedule_unsealed_lock
-- Start-up's sealing pass (ADR 0061): schedules with a secret or header value not yet in
-- the sealed format ("cws1:"), by id after $1, at most $2, locked until sealed (a tenant's
-- edit meanwhile waits, then writes sealed values itself). Deleted ones too: a dump holds
-- their rows.
SELECT id, tenant_id, target::text AS target_json, signing_secret, previous_signing_secret
FROM schedule
WHERE id > $1
  AND (signing_secret NOT LIKE 'cws1:%'
       OR previous_signing_secret NOT LIKE 'cws1:%'
       OR EXISTS (SELECT 1 FROM jsonb_each_text(
                      CASE WHEN jsonb_typeof(target -> 'headers') = 'object'
                           THEN target -> 'headers' ELSE '{}'::jsonb END) AS h
                  WHERE h.value NOT LIKE 'cws1:%'))
ORDER BY id
LIMIT $2
FOR UPDATE

-- name: schedule_seal
-- The sealed values of the rows schedule_unsealed_lock holds; updated_at is the tenant's
-- edit time, so it stays.
UPDATE schedule AS s
SET target = u.target::jsonb, signing_secret = u.signing_secret,
    previous_signing_secret = u.previous_signing_secret
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[])
     AS u(id, target, signing_secret, previous_signing_secret)
WHERE s.id = u.id

-- name: schedule_earliest_client_certificate_expiry
-- The fleet gauge of client certificate expiry (mTLS, ADR 0061): the stored not_after is
-- UTC text of one fixed shape, so its minimum is the earliest instant, read from
-- schedule_client_certificate_expiry_idx (migration 0025) without a scan.
SELECT min(target #>> '{tls,client_certificate_not_after}')
FROM schedule
WHERE status <> 'deleted' AND target ? 'tls'

-- name: schedule_bump_version
-- A change a person made (ADR 0056): the next version, in the change's transaction.
UPDATE schedule SET version = version + 1
WHERE tenant_id = $1 AND id = $2
RETURNING version

-- name: schedule_lock_by_calendar
-- The tenant's live schedules that exclude calendar $2, locked in id order before the
-- calendar itself is (calendar_lock): a calendar's edit re-plans them, its delete names
-- them. Reads the tenant's schedules through schedule_tenant_idx; each row's array holds
-- at most 10 ids.
SELECT id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
       catchup_window_seconds, status, next_fire_at, last_fire_at, starts_at, ends_at,
       signing_secret, previous_secret_expires_at, created_at, updated_at, run_at,
       overlap_policy, jitter_seconds, max_runs, pause_after_failures, runs_planned,
       consecutive_failures, paused_reason, paused_at,
       alert_after_failures, alert_late_after_seconds, alert_max_duration_ms, flow_control, version, key, managed_by,
       exclude_calendars, calendar_policy, now() AS db_now
FROM schedule
WHERE tenant_id = $1 AND $2 = ANY(exclude_calendars) AND status <> 'deleted'
ORDER BY id
FOR UPDATE

-- name: schedule_replan
-- A re-planned schedule's cursor after its calendars changed (the runs written ahead on
-- the old dates taken back first). Not a change of the schedule: no version.
UPDATE schedule SET next_fire_at = $3, last_fire_at = $4
WHERE tenant_id = $1 AND id = $2
