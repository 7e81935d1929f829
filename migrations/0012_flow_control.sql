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
