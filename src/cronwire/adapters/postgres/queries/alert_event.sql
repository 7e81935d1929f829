-- alert_event: one row per alert transition, delivered like a run (ADR 0036).
-- failing/recovered/slow rows are inserted by job_run_resolve (the terminal write); late
-- rows by alert_event_insert_late, the periodic check every replica runs.

-- name: alert_event_insert_late
-- The schedules with a late rule whose lateness changed: late when an occurrence planned
-- and not started is due longer than the rule ($1: how far back planned occurrences are
-- looked at, beyond the rule), or when the planner has not even planned one that was due
-- that long ago (next_fire_at: no planner runs at all). The flag is flipped by a
-- conditional UPDATE: of replicas checking at once, the first flips it and the others'
-- UPDATE, re-checked on the row the first left, matches nothing, so one event per
-- transition. A schedule no longer late is cleared without an event.
WITH checked AS (
    SELECT s.id, s.tenant_id, s.name, s.alert_late, s.alert_late_after_seconds AS late_after,
           s.status, s.next_fire_at, o.id AS run_id, o.scheduled_for AS occurrence
      FROM schedule s
      LEFT JOIN LATERAL (
        SELECT r.id, r.scheduled_for
          FROM job_run r
         WHERE r.schedule_id = s.id AND r.status = 'pending' AND r.trigger = 'schedule'
           AND r.scheduled_for >= now() - make_interval(secs => s.alert_late_after_seconds + $1)
           AND r.scheduled_for < now() - make_interval(secs => s.alert_late_after_seconds)
           AND r.fire_after < now() - make_interval(secs => s.alert_late_after_seconds)
         ORDER BY r.scheduled_for
         LIMIT 1) o ON true
     WHERE s.alert_late_after_seconds IS NOT NULL AND s.status <> 'deleted'
),
verdict AS (
    SELECT c.*,
           c.status = 'active'
           AND (c.run_id IS NOT NULL
                OR c.next_fire_at < now() - make_interval(secs => c.late_after)) AS late_now
      FROM checked c
),
flipped AS (
    UPDATE schedule s
       SET alert_late = v.late_now
      FROM verdict v
     WHERE s.id = v.id AND s.alert_late IS DISTINCT FROM v.late_now
    RETURNING s.id, s.tenant_id, s.name, v.late_now, v.run_id, v.late_after,
              COALESCE(v.occurrence, v.next_fire_at) AS occurrence
)
INSERT INTO alert_event (id, tenant_id, schedule_id, schedule_name, type, run_id, detail,
                         status)
SELECT gen_random_uuid(), f.tenant_id, f.id, f.name, 'schedule.late', f.run_id,
       jsonb_build_object('occurrence', f.occurrence, 'late_after_seconds', f.late_after,
                          'planned', f.run_id IS NOT NULL),
       CASE WHEN 'schedule.late' = ANY (d.events) THEN 'pending' ELSE 'undelivered' END
  FROM flipped f
  LEFT JOIN tenant_alert_destination d ON d.tenant_id = f.tenant_id
 WHERE f.late_now
RETURNING id

-- name: alert_event_claim
-- $1 owner, $2 limit, $3 lease seconds, $4 deliveries in flight allowed per tenant.
-- Tenants take turns (ADR 0055): per tenant, its due events oldest first, at most as many
-- as it has free delivery slots (the cap less its leases still live, on any replica);
-- then the first of every tenant, oldest tenant first, then the second of each, and so
-- on. One tenant's backlog or hanging destination thus holds its own slots and never
-- the others' turn. Due: pending or retrying events due now, or deliveries whose owner
-- vanished (their lease expired). The ranking reads a snapshot; the lock re-checks each
-- row (SKIP LOCKED across replicas), so an event another replica claimed meanwhile is
-- skipped, not claimed twice. Each claim is a new attempt and a new lease generation,
-- with the tenant's destination as it is now (NULL: removed).
WITH in_flight AS (
    SELECT e.tenant_id, count(*) AS n
      FROM alert_event e
     WHERE e.status = 'delivering' AND e.claim_expires_at >= now()
     GROUP BY e.tenant_id
),
ranked AS (
    SELECT e.id, e.tenant_id, e.fire_after,
           row_number() OVER (PARTITION BY e.tenant_id ORDER BY e.fire_after, e.id) AS turn,
           min(e.fire_after) OVER (PARTITION BY e.tenant_id) AS tenant_oldest
      FROM alert_event e
     WHERE (e.status IN ('pending', 'retrying') AND e.fire_after <= now())
        OR (e.status = 'delivering' AND e.claim_expires_at < now() AND e.attempt_count < 8)
),
due AS (
    SELECT e.id
      FROM alert_event e
      JOIN ranked r ON r.id = e.id
      LEFT JOIN in_flight f ON f.tenant_id = r.tenant_id
     WHERE r.turn <= $4 - COALESCE(f.n, 0)
       AND ((e.status IN ('pending', 'retrying') AND e.fire_after <= now())
            OR (e.status = 'delivering' AND e.claim_expires_at < now()
                AND e.attempt_count < 8))
     ORDER BY r.turn, r.tenant_oldest, r.tenant_id
     LIMIT $2
       FOR UPDATE OF e SKIP LOCKED
)
UPDATE alert_event e
   SET status = 'delivering', claimed_by = $1,
       claim_expires_at = now() + make_interval(secs => $3),
       lease_generation = e.lease_generation + 1,
       attempt_count = LEAST(e.attempt_count + 1, 8)
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.tenant_id, e.schedule_id, e.schedule_name, e.type, e.run_id, e.at,
          e.detail, e.status, e.attempt_count, e.last_status_code, e.last_error,
          e.delivered_at, e.created_at, e.lease_generation,
          (SELECT d.url FROM tenant_alert_destination d WHERE d.tenant_id = e.tenant_id) AS url,
          (SELECT d.signing_secret FROM tenant_alert_destination d
            WHERE d.tenant_id = e.tenant_id) AS signing_secret

-- name: alert_event_fail_abandoned
-- A delivery whose owner vanished during its last allowed attempt: failed, not retried.
UPDATE alert_event
   SET status = 'failed', claim_expires_at = NULL,
       last_error = 'LeaseExpired: the owner of the final attempt vanished; not sent again'
 WHERE status = 'delivering' AND claim_expires_at < now() AND attempt_count >= 8

-- name: alert_event_resolve
-- One attempt's end, predicated on the lease (owner and generation), with its evidence.
-- $1 owner, $2 id, $3 generation, $4 status (delivered, retrying, failed, undelivered),
-- $5 retry delay seconds, $6 status code, $7 error, $8 started_at, $9 finished_at,
-- $10 outcome, $11 duration ms, $12 response excerpt; no evidence when $8 is NULL.
WITH landed AS (
    UPDATE alert_event
       SET status = $4,
           fire_after = CASE WHEN $4 = 'retrying'
                             THEN now() + make_interval(secs => $5) ELSE fire_after END,
           claim_expires_at = NULL, last_status_code = $6, last_error = $7,
           delivered_at = CASE WHEN $4 = 'delivered' THEN now() END
     WHERE id = $2 AND claimed_by = $1 AND lease_generation = $3 AND status = 'delivering'
    RETURNING id, attempt_count
),
evidence AS (
    INSERT INTO alert_event_attempt (event_id, attempt, started_at, finished_at, outcome,
                                     status_code, error, duration_ms, response_excerpt)
    SELECT id, attempt_count, $8, $9, $10, $6, $7, $11, $12
      FROM landed
     WHERE $8::timestamptz IS NOT NULL
    ON CONFLICT DO NOTHING
)
SELECT id FROM landed

-- name: alert_event_list
-- $1 tenant, $2 $3 the previous page's last (created_at, id), $4 limit; newest first.
SELECT id, tenant_id, schedule_id, schedule_name, type, run_id, at, detail, status,
       attempt_count, last_status_code, last_error, delivered_at, created_at
  FROM alert_event
 WHERE tenant_id = $1 AND (created_at, id) < ($2, $3)
 ORDER BY created_at DESC, id DESC
 LIMIT $4

-- name: alert_event_attempt_list
-- $1 tenant, $2 event ids: their attempts, oldest first.
SELECT a.event_id, a.attempt, a.started_at, a.finished_at, a.outcome, a.status_code,
       a.error, a.duration_ms, a.response_excerpt
  FROM alert_event_attempt a
  JOIN alert_event e ON e.id = a.event_id
 WHERE e.tenant_id = $1 AND a.event_id = ANY ($2::uuid[])
 ORDER BY a.event_id, a.attempt

-- name: alert_event_delete_expired
-- Retention (SCHEDULER_AUDIT_RETENTION_DAYS): up to $2 of the oldest events created more
-- than $1 days ago, with their attempts (ON DELETE CASCADE); the caller repeats while a
-- batch comes back full, so no statement holds many locks or runs long. An event still
-- being delivered is left for the next pass.
WITH expired AS (
    SELECT id
      FROM alert_event
     WHERE created_at < now() - make_interval(days => $1)
       AND status <> 'delivering'
     ORDER BY created_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
DELETE FROM alert_event e
 USING expired
 WHERE e.id = expired.id

-- name: alert_event_insert_untold_failing
-- Flap damping's last word: a schedule whose last flip (to failing) was damped, and that
-- is still failing when its 60 s window has passed, is told so now, with the flips
-- counted meanwhile; otherwise a tenant told "recovered" would never hear it failed
-- again until the next transition. Rows the terminal write holds are skipped (seen on
-- the next pass); the conditional UPDATE makes one event across replicas.
WITH untold AS (
    SELECT s.id, s.alert_suppressed_flips AS flips
      FROM schedule s
     WHERE s.alert_failing AND NOT s.alert_told_failing AND s.status <> 'deleted'
       AND s.alert_flap_window_start <= now() - interval '60 seconds'
       FOR UPDATE SKIP LOCKED
),
told AS (
    UPDATE schedule s
       SET alert_told_failing = true, alert_flap_window_start = now(),
           alert_suppressed_flips = 0
      FROM untold u
     WHERE s.id = u.id
    RETURNING s.id, s.tenant_id, s.name, s.consecutive_failures, s.alert_after_failures,
              u.flips
)
INSERT INTO alert_event (id, tenant_id, schedule_id, schedule_name, type, detail, status)
SELECT gen_random_uuid(), t.tenant_id, t.id, t.name, 'schedule.failing',
       jsonb_build_object('consecutive_failures', t.consecutive_failures,
                          'after_failures', t.alert_after_failures,
                          'suppressed_flips', t.flips),
       CASE WHEN 'schedule.failing' = ANY (d.events) THEN 'pending' ELSE 'undelivered' END
  FROM told t
  LEFT JOIN tenant_alert_destination d ON d.tenant_id = t.tenant_id
RETURNING id
