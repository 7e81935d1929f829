-- Who may do what, and who did what (ADR 0056).
--
-- Tokens get a scope (read < write < admin), an optional name and expiry, and the time
-- they were last used (written at most once a minute per token, never per request).
-- Every token issued before this migration keeps the power it had: admin. Constant
-- defaults and nullable columns: nothing is rewritten.
ALTER TABLE api_token
    ADD COLUMN scope        text NOT NULL DEFAULT 'admin'
                                 CHECK (scope IN ('read', 'write', 'admin')),
    ADD COLUMN name         text CHECK (length(name) BETWEEN 1 AND 100),
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN last_used_at timestamptz;

-- GET /v1/tokens and the live-token cap read a tenant's unrevoked tokens.
CREATE INDEX api_token_live_idx ON api_token (tenant_id, created_at) WHERE revoked_at IS NULL;

-- A schedule's version: 1 on create, +1 per change a person makes (ETag, If-Match). The
-- planner and the executor never touch it.
ALTER TABLE schedule ADD COLUMN version bigint NOT NULL DEFAULT 1 CHECK (version >= 1);

-- The audit log: one row per change, written in the transaction of the change. Monthly
-- partitions by `at` (the transaction's now()), created ahead and dropped past
-- SCHEDULER_AUDIT_RETENTION_DAYS by the partition keeper, like the run history.
CREATE TABLE audit_event (
    id             uuid        NOT NULL DEFAULT gen_random_uuid(),
    tenant_id      uuid        NOT NULL,
    at             timestamptz NOT NULL DEFAULT now(),
    actor          jsonb       NOT NULL,
    action         text        NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
    object_type    text        NOT NULL CHECK (length(object_type) BETWEEN 1 AND 64),
    object_id      text        CHECK (length(object_id) <= 64),
    request_id     text        CHECK (length(request_id) <= 64),
    client_address text        CHECK (length(client_address) <= 64),
    changes        jsonb       NOT NULL,
    PRIMARY KEY (tenant_id, at, id)
) PARTITION BY RANGE (at);

-- GET /v1/audit?object_id= walks one object's changes newest first.
CREATE INDEX audit_event_object_idx ON audit_event (tenant_id, object_id, at DESC, id DESC);

-- A schedule's definition at each version, for GET .../revisions and restore. The
-- definition's header values are sealed exactly as in the schedule row.
CREATE TABLE schedule_revision (
    tenant_id   uuid        NOT NULL,
    schedule_id uuid        NOT NULL REFERENCES schedule (id),
    version     bigint      NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       jsonb       NOT NULL,
    action      text        NOT NULL,
    changes     jsonb       NOT NULL,
    definition  jsonb       NOT NULL,
    PRIMARY KEY (schedule_id, version)
);
CREATE INDEX schedule_revision_at_idx ON schedule_revision (at);

-- Monthly partitions of audit_event covering [from_month, from_month + months).
-- Idempotent; used by this migration and by the partition keeper.
CREATE FUNCTION cronwire_ensure_audit_partitions(from_month date, months integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    created integer := 0;
    lo date;
    hi date;
    part text;
BEGIN
    FOR i IN 0 .. months - 1 LOOP
        lo := (date_trunc('month', from_month) + make_interval(months => i))::date;
        hi := (lo + interval '1 month')::date;
        part := 'audit_event_' || to_char(lo, '"p"YYYY"_"MM');
        IF to_regclass(part) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF audit_event FOR VALUES FROM (%L) TO (%L)',
                           part, lo::timestamp AT TIME ZONE 'UTC', hi::timestamp AT TIME ZONE 'UTC');
            created := created + 1;
        END IF;
    END LOOP;
    RETURN created;
END
$$;

SELECT cronwire_ensure_audit_partitions((now() AT TIME ZONE 'UTC' - interval '1 month')::date, 4);
