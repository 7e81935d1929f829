-- Stage 1, the planner: claim due schedules, materialise their runs, advance them.
-- All three run in ONE transaction (PostgresPlannerStore.plan_on); each is one round trip.

-- name: schedule_claim_due
-- $1 lookahead seconds, $2 batch size. now() is the only clock: it is the transaction's
-- start time, returned so the pure planner decides with exactly the instant used here.
SELECT id, tenant_id, cron, timezone, misfire_policy, catchup_window_seconds,
       next_fire_at, last_fire_at, starts_at, ends_at, now() AS db_now
FROM schedule
WHERE status = 'active' AND next_fire_at <= now() + make_interval(secs => $1)
ORDER BY next_fire_at
LIMIT $2
FOR UPDATE SKIP LOCKED

-- name: job_run_partition_bounds
-- [lower_bound, upper_bound) of every attached job_run range partition, from the catalog
-- (not from partition names): pg_get_expr gives "FOR VALUES FROM ('<lo>') TO ('<hi>')".
-- A partition being detached ("detach pending") takes no new rows, so it does not count;
-- DEFAULT and MINVALUE/MAXVALUE bounds do not match and are left out. split_part, not a
-- regular expression: about 0.4 ms per call instead of 3 ms (ADR 0010).
SELECT split_part(e, '''', 2)::timestamptz AS lower_bound,
       split_part(e, '''', 4)::timestamptz AS upper_bound
FROM (
    SELECT pg_get_expr(c.relpartbound, c.oid) AS e
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'job_run'::regclass AND NOT i.inhdetachpending
) AS bounds
WHERE e LIKE 'FOR VALUES FROM (''%'') TO (''%'')'

-- name: job_run_insert_planned
-- Every planned run in one statement. ON CONFLICT DO NOTHING covers both the primary key
-- (deterministic id) and UNIQUE (schedule_id, scheduled_for): re-planning an occurrence
-- (cursor moved backwards, operator replan) is harmless. Skipped runs are terminal at once.
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, trigger,
                     status, fire_after, finished_at, last_error)
SELECT r.id, r.tenant_id, r.schedule_id, r.scheduled_for, r.idempotency_key, r.trigger,
       r.status, r.scheduled_for,
       CASE WHEN r.status = 'skipped' THEN now() END,
       CASE WHEN r.status = 'skipped' THEN 'missed while no planner ran; dropped by the misfire policy' END
FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[])
     AS r(id, tenant_id, schedule_id, scheduled_for, idempotency_key, trigger, status)
ON CONFLICT DO NOTHING

-- name: schedule_advance
-- The cursors of the claimed (still locked) schedules; NULL next_fire_at = no more fires.
-- updated_at is the tenant's edit time, so the planner leaves it alone. The redundant
-- "id = ANY($1)" lets Postgres fetch the batch by primary key instead of hashing a scan of
-- the whole table (it cannot see through the join on unnest), so cost follows the batch,
-- not the number of schedules.
UPDATE schedule AS s
SET next_fire_at = a.next_fire_at,
    last_fire_at = a.last_fire_at
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[])
     AS a(id, next_fire_at, last_fire_at)
WHERE s.id = a.id AND s.id = ANY($1::uuid[])

-- name: database_now
-- The one clock authority for due decisions.
SELECT now()
