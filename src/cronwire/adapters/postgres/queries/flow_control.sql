-- flow_control: one row per (tenant, key) with the key's limits and state (migration 0012,
-- ADR 0040). The claim statements (job_run.sql) admit runs against these rows under their
-- locks and count the slots they take; every write that ends a lease gives its slots back.
-- The statements here are the API's: a schedule's key and limits, and what a tenant sees.

-- name: flow_control_set_schedule
-- A schedule's flow_control object as given ($3, NULL: none) and the key it resolves to
-- ($4), in the transaction that created or edited it. $1 tenant, $2 schedule.
UPDATE schedule SET flow_control = $3, flow_key = $4
WHERE tenant_id = $1 AND id = $2

-- name: flow_control_sync
-- The limits of these keys ($2) of tenant $1: the strictest of the key's live schedules'
-- (none left: no limits), the bucket's size defaulting to one second's tokens. A key seen
-- for the first time starts with a full bucket; a smaller bucket keeps no more tokens than
-- it holds. Run after every create, edit and delete that names the key.
INSERT INTO flow_control AS f (tenant_id, key, max_concurrency, rate_per_second, burst,
                               tokens, tokens_at)
SELECT $1, k.key, l.max_concurrency, l.rate_per_second, l.burst, COALESCE(l.burst, 0), now()
  FROM unnest($2::text[]) AS k(key)
 CROSS JOIN LATERAL (
    SELECT min((s.flow_control ->> 'max_concurrency')::integer) AS max_concurrency,
           min((s.flow_control ->> 'rate_per_second')::float8) AS rate_per_second,
           min(COALESCE((s.flow_control ->> 'burst')::integer,
                        GREATEST(1, ceil((s.flow_control ->> 'rate_per_second')::float8))::integer))
               FILTER (WHERE s.flow_control ->> 'rate_per_second' IS NOT NULL) AS burst
      FROM schedule s
     WHERE s.tenant_id = $1 AND s.flow_key = k.key AND s.status <> 'deleted') l
 WHERE k.key <> ''
ON CONFLICT (tenant_id, key) DO UPDATE
   SET max_concurrency = EXCLUDED.max_concurrency,
       rate_per_second = EXCLUDED.rate_per_second,
       burst           = EXCLUDED.burst,
       tokens          = CASE WHEN f.rate_per_second IS NULL THEN EXCLUDED.tokens
                              ELSE LEAST(f.tokens, EXCLUDED.tokens) END,
       updated_at      = now()

-- name: flow_control_rekey_runs
-- A schedule whose key changed: its runs not started yet ($1 tenant, $2 schedule) leave
-- the old key ($3) for the new one ($4, NULL: no flow control), so a hold or a limit of
-- the key it left no longer keeps them pending (job_run_flow_waiting_idx finds them).
UPDATE job_run SET flow_key = $4, updated_at = now()
 WHERE tenant_id = $1 AND flow_key = $3 AND schedule_id = $2
   AND status IN ('pending', 'retrying')

-- name: flow_control_release_holds
-- A tenant changed these keys' limits or deleted a schedule of them ($1 tenant, $2 keys):
-- a receiver's Retry-After hold on them ends now (the next 429 holds them again).
UPDATE flow_control SET held_until = NULL, updated_at = now()
 WHERE tenant_id = $1 AND key = ANY ($2::text[]) AND held_until IS NOT NULL

-- name: flow_control_key_of
-- The key a schedule counts under ($1 tenant, $2 schedule), deleted or not.
SELECT flow_key FROM schedule WHERE tenant_id = $1 AND id = $2

-- name: flow_control_list
-- GET /v1/flow-control: the tenant's keys (not its own row, key ''), with the runs in
-- flight and those due and waiting (job_run_flow_waiting_idx), and a hold still running.
-- $3: only that key (NULL: every key; the console asks for a schedule's own).
-- held_until is read through LEAST: a hold is never written beyond an hour (migration
-- 0018's CHECK), and this read must answer even for a row that predates that rule.
SELECT f.key, f.max_concurrency, f.rate_per_second, f.in_flight,
       CASE WHEN f.held_until > now()
            THEN LEAST(f.held_until, now() + interval '1 hour') END AS held_until,
       (SELECT count(*) FROM job_run r
         WHERE r.tenant_id = f.tenant_id AND r.flow_key = f.key
           AND r.status IN ('pending', 'retrying') AND r.fire_after <= now()) AS waiting
  FROM flow_control f
 WHERE f.tenant_id = $1 AND f.key <> '' AND ($3::text IS NULL OR f.key = $3)
 ORDER BY f.key
 LIMIT $2

-- name: flow_control_waiting
-- The gauge scheduler_flow_control_waiting: runs due and not started whose key is at its
-- limit, out of tokens or held, across every tenant (no tenant label).
SELECT count(*)
  FROM flow_control f
  JOIN job_run r ON r.tenant_id = f.tenant_id AND r.flow_key = f.key
 WHERE f.key <> ''
   AND (f.held_until > now() OR f.in_flight >= f.max_concurrency
        OR LEAST(f.burst, f.tokens + f.rate_per_second
                          * EXTRACT(EPOCH FROM now() - f.tokens_at)) < 1)
   AND r.status IN ('pending', 'retrying') AND r.fire_after <= now()
