-- What the harnesses write and count straight in SQL (the tests, `cronwire loadtest`,
-- `cronwire chaos`, the benchmarks); never used by serve.

-- name: seeding_now
SELECT now()

-- name: seeding_tenant_insert
INSERT INTO tenant (id, name) VALUES ($1, $2)

-- name: seeding_schedule_insert
-- One schedule the planner never fires (next_fire_at NULL): it only owns seeded runs.
-- $1 id, $2 tenant, $3 target, $4 retry, $5 secret, $6 previous secret (signs for a day).
INSERT INTO schedule (id, tenant_id, name, cron, target, retry, signing_secret,
                      previous_signing_secret, previous_secret_expires_at, next_fire_at)
VALUES ($1, $2, 'seeded', '* * * * *', $3::jsonb, $4::jsonb, $5, $6,
        CASE WHEN $6::text IS NULL THEN NULL ELSE now() + interval '1 day' END, NULL)

-- name: seeding_firing_schedules_insert
-- Schedules the planner fires from $6 on. ends_at bounds the test: the planner itself
-- stops every schedule at the horizon. $1 ids, $2 tenant, $3 cron, $4 target, $5 retry,
-- $6 first fire, $7 ends_at, $8 each one's sealed secret, $9 name prefix, $10 jitter_seconds.
INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
                      status, next_fire_at, ends_at, signing_secret, jitter_seconds)
SELECT id, $2, $9 || ord, $3, 'UTC', $4::jsonb, $5::jsonb, 'fire_all', 'active', $6, $7,
       secret, $10
FROM unnest($1::uuid[], $8::text[]) WITH ORDINALITY AS s(id, secret, ord)

-- name: seeding_due_runs_insert
-- $4 pending runs of schedule $2 (tenant $1), numbered from $3: occurrences 1 ms apart
-- from an hour ago, so calls with distinct numbers never collide on (schedule,
-- scheduled_for). Due at $5, or (NULL) $6 seconds before now(); the ids are derived from
-- (schedule, number), so they can be known before the insert. Returns the run ids.
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, status,
                     fire_after, flow_key)
SELECT md5($2::uuid::text || '/' || g::text)::uuid, $1, $2::uuid,
       date_trunc('second', now()) - interval '1 hour' + g * interval '1 millisecond',
       'msg_' || md5($2::uuid::text || '/' || g::text), 'pending',
       COALESCE($5::timestamptz, now() - make_interval(secs => $6)),
       (SELECT flow_key FROM schedule WHERE id = $2::uuid)
  FROM generate_series($3::integer, $3::integer + $4::integer - 1) AS g
RETURNING id

-- name: seeding_flow_control
-- Flow control on schedule $2 (tenant $1): its object $3 and key $4, set on its runnable
-- runs too, and the key's limits $5 max_concurrency, $6 rate_per_second, $7 burst (a
-- full bucket), as the API's create would leave them (flow_control_sync).
WITH marked AS (
    UPDATE schedule SET flow_control = $3::jsonb, flow_key = $4 WHERE id = $2
), runs AS (
    UPDATE job_run SET flow_key = $4
     WHERE schedule_id = $2 AND status IN ('pending', 'retrying')
)
INSERT INTO flow_control (tenant_id, key, max_concurrency, rate_per_second, burst, tokens)
VALUES ($1, $4, $5, $6, $7, COALESCE($7, 0))
ON CONFLICT (tenant_id, key) DO UPDATE
   SET max_concurrency = EXCLUDED.max_concurrency, rate_per_second = EXCLUDED.rate_per_second,
       burst = EXCLUDED.burst, tokens = EXCLUDED.tokens, tokens_at = now()

-- name: seeding_status_counts
SELECT status, count(*) AS n FROM job_run GROUP BY status

-- name: seeding_non_terminal
SELECT count(*) FROM job_run WHERE status IN ('pending', 'running', 'retrying')
