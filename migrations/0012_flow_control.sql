-- Flow control (issue 27, ADR 0040): per-key concurrency and rate limits, holds from a
-- receiver's Retry-After, and a per-tenant concurrency limit, shared by every replica and
-- decided inside the claim statements. Every new column of job_run has a constant default
-- or none, so no partition is rewritten.

-- tenant ----------------------------------------------------------------------------

-- NULL: SCHEDULER_TENANT_MAX_CONCURRENCY (default unlimited).
ALTER TABLE tenant ADD COLUMN max_concurrency integer CHECK (max_concurrency > 0);

-- schedule --------------------------------------------------------------------------

-- The tenant's flow_control object as given ({key?, max_concurrency?, rate_per_second?,
-- burst?}); NULL: no flow control. flow_key is its key as resolved (the target's origin
-- when the tenant named none), the key the schedule's runs are counted under.
ALTER TABLE schedule ADD COLUMN flow_control jsonb;
ALTER TABLE schedule ADD COLUMN flow_key text;
-- The key's limits are the strictest of its live schedules' (flow_control_sync).
CREATE INDEX schedule_flow_key_idx ON schedule (tenant_id, flow_key)
    WHERE flow_key IS NOT NULL AND status <> 'deleted';

-- flow_control ----------------------------------------------------------------------

-- One row per (tenant, key): the key's limits and its state, read and written under the
-- row's lock by the claim (admission) and by every write that ends a lease (release). The
-- row with key '' is the tenant's own: its in_flight counts every slotted lease of the
-- tenant, its limit is tenant.max_concurrency or the configured default (a tenant's key
-- is never '': the API refuses it).
CREATE TABLE flow_control (
    tenant_id        uuid        NOT NULL REFERENCES tenant (id) ON DELETE CASCADE,
    key              text        NOT NULL,
    max_concurrency  integer     CHECK (max_concurrency > 0),
    rate_per_second  float8      CHECK (rate_per_second > 0),
    burst            integer     CHECK (burst > 0),
    -- Leases holding a slot of this row now (job_run.flow_slots says which rows a lease
    -- holds); a claim adds, the lease's end subtracts.
    in_flight        integer     NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    -- Token bucket: tokens as of tokens_at; refilled at rate_per_second up to burst.
    tokens           float8      NOT NULL DEFAULT 0,
    tokens_at        timestamptz NOT NULL DEFAULT now(),
    -- A receiver's 429/503 Retry-After holds the whole key until then.
    held_until       timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);

-- Every tenant has its own row, so the claim can lock it whenever a limit applies.
INSERT INTO flow_control (tenant_id, key) SELECT id, '' FROM tenant
ON CONFLICT DO NOTHING;

CREATE FUNCTION cronwire_tenant_flow_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO flow_control (tenant_id, key) VALUES (NEW.id, '') ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;

CREATE TRIGGER tenant_flow_row AFTER INSERT ON tenant
    FOR EACH ROW EXECUTE FUNCTION cronwire_tenant_flow_row();

-- job_run ---------------------------------------------------------------------------

-- The schedule's flow key when the run was written; NULL: the run has no key.
ALTER TABLE job_run ADD COLUMN flow_key text;
-- Which flow_control rows the current lease holds a slot of: 1 its key's, 2 its tenant's
-- (bits). Set by the claim, cleared by whatever ends the lease.
ALTER TABLE job_run ADD COLUMN flow_slots smallint NOT NULL DEFAULT 0;
-- GET /v1/flow-control and the waiting gauge count runnable keyed runs per key.
CREATE INDEX job_run_flow_waiting_idx ON job_run (tenant_id, flow_key)
    WHERE flow_key IS NOT NULL AND status IN ('pending', 'retrying');

-- tenant limits ---------------------------------------------------------------------

-- Whether any tenant has a limit of its own: the claim asks before admitting anything.
CREATE INDEX tenant_limited_idx ON tenant (id) WHERE max_concurrency IS NOT NULL;

-- The claim's admission (ADR 0040), a function for the reason the overlap gate is one (ADR
-- 0033): as CTEs of the claim its subplans cost every claim several milliseconds of
-- backend CPU per 500 runs with no flow control anywhere; as a function it is planned and
-- run only when some candidate may need a slot. Input: the claim's candidates that are not
-- expired leases (p_ids .. p_keys), with their claim order (p_turns, p_fire_afters).
-- Locks the flow_control rows they need (SKIP LOCKED: a row another transaction holds
-- admits nothing this time) and returns each candidate that needs a slot with the slots it
-- takes (1 its key's, 2 its tenant's) and whether it is admitted: in claim order, while its
-- key admits more (free slots, whole tokens after refilling, not held), then while its
-- tenant does. A candidate that needs no slot is not returned (it is admitted as it is).
CREATE FUNCTION cronwire_flow_admit(
    p_ids uuid[], p_ats timestamptz[], p_tenants uuid[], p_keys text[], p_turns bigint[],
    p_fire_afters timestamptz[])
RETURNS TABLE (id uuid, scheduled_for timestamptz, slots smallint, admitted boolean)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    IF cardinality(p_ids) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH candidate AS (
        SELECT * FROM unnest(p_ids, p_ats, p_tenants, p_keys, p_turns, p_fire_afters)
            AS c(id, scheduled_for, tenant_id, flow_key, turn, fire_after)
    ),
    limited AS (
        -- The candidates' tenants with a limit: their column, else the replica's
        -- SCHEDULER_TENANT_MAX_CONCURRENCY (a session setting, pool.py).
        SELECT t.id AS tenant_id,
               COALESCE(t.max_concurrency,
                        NULLIF(current_setting('cronwire.tenant_max_concurrency', true), '')::integer)
                   AS max_concurrency
          FROM tenant t
         WHERE t.id = ANY (p_tenants)
           AND COALESCE(t.max_concurrency,
                        NULLIF(current_setting('cronwire.tenant_max_concurrency', true), '')::integer)
               IS NOT NULL
    ),
    rows_locked AS MATERIALIZED (
        SELECT f.tenant_id, f.key,
               CASE WHEN f.held_until > now() THEN 0
                    ELSE LEAST(COALESCE(COALESCE(w.max_concurrency, f.max_concurrency) - f.in_flight,
                                        2147483647),
                               COALESCE(floor(LEAST(f.burst, f.tokens + f.rate_per_second
                                                    * EXTRACT(EPOCH FROM now() - f.tokens_at))),
                                        2147483647)) END AS allowed
          FROM (SELECT DISTINCT c.tenant_id, c.flow_key AS key, NULL::integer AS max_concurrency
                  FROM candidate c WHERE c.flow_key IS NOT NULL
                UNION ALL
                SELECT l.tenant_id, '', l.max_concurrency FROM limited l) w
         CROSS JOIN LATERAL (
            SELECT * FROM flow_control f WHERE f.tenant_id = w.tenant_id AND f.key = w.key
               FOR UPDATE SKIP LOCKED) f
    ),
    by_key AS (
        SELECT c.id, c.scheduled_for, c.tenant_id, c.flow_key, c.turn, c.fire_after,
               (CASE WHEN c.flow_key IS NOT NULL THEN 1 ELSE 0 END
                + CASE WHEN l.tenant_id IS NOT NULL THEN 2 ELSE 0 END)::smallint AS slots,
               c.flow_key IS NULL
                   OR row_number() OVER (PARTITION BY c.tenant_id, c.flow_key
                                         ORDER BY c.turn, c.fire_after)
                      <= COALESCE(k.allowed, 0) AS key_ok
          FROM candidate c
          LEFT JOIN limited l ON l.tenant_id = c.tenant_id
          LEFT JOIN rows_locked k ON k.tenant_id = c.tenant_id AND k.key = c.flow_key
         WHERE c.flow_key IS NOT NULL OR l.tenant_id IS NOT NULL
    )
    SELECT b.id, b.scheduled_for, b.slots,
           b.key_ok AND (b.slots & 2 = 0 OR b.tenant_rank <= COALESCE(t.allowed, 0))
      FROM (SELECT b.*, CASE WHEN b.key_ok THEN row_number() OVER (
                                PARTITION BY b.tenant_id, b.key_ok ORDER BY b.turn, b.fire_after)
                        END AS tenant_rank
              FROM by_key b) b
      LEFT JOIN rows_locked t ON t.tenant_id = b.tenant_id AND t.key = '';
END
$fn$;
