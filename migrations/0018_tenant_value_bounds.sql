-- Tenant isolation (issue 46, ADR 0055): every number a tenant supplies, and every value a
-- receiver's answer can set, has a floor and a ceiling in the database as it has in the
-- domain, so no accepted value can make a statement shared by every tenant (a claim, a
-- resolve, the flow-control sync) raise. A flow-control rate of 5e-324 per second once
-- made the token bucket's product underflow inside the claim of every tenant, and a
-- Retry-After of 999999999999 s held a key until the year 33715, beyond what the driver
-- can read. Existing rows are brought inside the bounds first, then the bounds are added.

-- flow_control: the key's limits (the strictest of its schedules') and its hold ----------

UPDATE flow_control
   SET rate_per_second = LEAST(GREATEST(rate_per_second, 0.00001), 10000)
 WHERE rate_per_second < 0.00001 OR rate_per_second > 10000;
UPDATE flow_control SET max_concurrency = 10000 WHERE max_concurrency > 10000;
UPDATE flow_control SET burst = 10000 WHERE burst > 10000;
UPDATE flow_control SET held_until = now() + interval '1 hour', updated_at = now()
 WHERE held_until > now() + interval '1 hour';

ALTER TABLE flow_control DROP CONSTRAINT IF EXISTS flow_control_rate_per_second_check;
ALTER TABLE flow_control DROP CONSTRAINT IF EXISTS flow_control_max_concurrency_check;
ALTER TABLE flow_control DROP CONSTRAINT IF EXISTS flow_control_burst_check;
ALTER TABLE flow_control
    ADD CONSTRAINT flow_control_rate_per_second_bounds
        CHECK (rate_per_second BETWEEN 0.00001 AND 10000),
    ADD CONSTRAINT flow_control_max_concurrency_bounds
        CHECK (max_concurrency BETWEEN 1 AND 10000),
    ADD CONSTRAINT flow_control_burst_bounds CHECK (burst BETWEEN 1 AND 10000),
    -- A hold is written as now() plus at most an hour (job_run_resolve clamps it). The
    -- check is only the readable range: one tied to the row's own clock could fail inside
    -- a claim whose transaction started before the hold was written.
    ADD CONSTRAINT flow_control_hold_bounds
        CHECK (held_until < timestamptz '9999-01-01 00:00:00+00');

-- schedule: the flow_control and retry documents as stored -----------------------------

UPDATE schedule
   SET flow_control = jsonb_set(flow_control, '{rate_per_second}', to_jsonb(
           LEAST(GREATEST((flow_control ->> 'rate_per_second')::float8, 0.00001), 10000)))
 WHERE jsonb_typeof(flow_control -> 'rate_per_second') = 'number'
   AND ((flow_control ->> 'rate_per_second')::float8 < 0.00001
        OR (flow_control ->> 'rate_per_second')::float8 > 10000);
UPDATE schedule
   SET retry = jsonb_set(retry, '{initial_backoff_seconds}', to_jsonb(0.01))
 WHERE jsonb_typeof(retry -> 'initial_backoff_seconds') = 'number'
   AND (retry ->> 'initial_backoff_seconds')::float8 < 0.01;
UPDATE schedule
   SET retry = jsonb_set(retry, '{max_backoff_seconds}', to_jsonb(0.01))
 WHERE jsonb_typeof(retry -> 'max_backoff_seconds') = 'number'
   AND (retry ->> 'max_backoff_seconds')::float8 < 0.01;
UPDATE schedule SET catchup_window_seconds = 604800 WHERE catchup_window_seconds > 604800;

-- A member is either absent or a number inside its bounds: the shared statements cast
-- these members (::integer, ::float8) and a string or an out-of-range number would make
-- the cast raise for every tenant.
CREATE FUNCTION cronwire_number_within(doc jsonb, member text, low numeric, high numeric)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT doc -> member IS NULL OR jsonb_typeof(doc -> member) = 'null'
        OR (jsonb_typeof(doc -> member) = 'number'
            AND (doc ->> member)::numeric BETWEEN low AND high)
$$;

ALTER TABLE schedule
    ADD CONSTRAINT schedule_flow_control_bounds CHECK (
        flow_control IS NULL
        OR (cronwire_number_within(flow_control, 'rate_per_second', 0.00001, 10000)
            AND cronwire_number_within(flow_control, 'max_concurrency', 1, 10000)
            AND cronwire_number_within(flow_control, 'burst', 1, 10000))),
    ADD CONSTRAINT schedule_retry_bounds CHECK (
        cronwire_number_within(retry, 'max_attempts', 1, 8)
        AND cronwire_number_within(retry, 'initial_backoff_seconds', 0.01, 86400)
        AND cronwire_number_within(retry, 'max_backoff_seconds', 0.01, 86400)),
    ADD CONSTRAINT schedule_catchup_window_bounds
        CHECK (catchup_window_seconds BETWEEN 0 AND 604800);
