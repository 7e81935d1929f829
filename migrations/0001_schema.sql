-- cronwire schema, version 1.
-- job_run is the source of truth in every mode; see ADRs/0001-postgres-claim-queue.md.

CREATE TABLE tenant (
    id                   uuid        PRIMARY KEY,
    name                 text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- NULL limit = the service-wide default from configuration.
    max_schedules        integer     CHECK (max_schedules > 0),
    min_interval_seconds integer     CHECK (min_interval_seconds > 0),
    max_body_bytes       integer     CHECK (max_body_bytes > 0),
    max_headers          integer     CHECK (max_headers > 0),
    created_at           timestamptz NOT NULL DEFAULT now()
);

-- Only a SHA-256 of each token is stored; the token itself is shown once.
CREATE TABLE api_token (
    token_hash  bytea       PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    tenant_id   uuid        NOT NULL REFERENCES tenant (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_token_tenant_idx ON api_token (tenant_id);

CREATE TABLE schedule (
    id                      uuid        PRIMARY KEY,
    tenant_id               uuid        NOT NULL REFERENCES tenant (id),
    name                    text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    cron                    text        NOT NULL,
    timezone                text        NOT NULL DEFAULT 'UTC',
    target                  jsonb       NOT NULL,
    retry                   jsonb       NOT NULL,
    misfire_policy          text        NOT NULL DEFAULT 'fire_all'
                                        CHECK (misfire_policy IN ('fire_all', 'fire_once', 'skip')),
    catchup_window_seconds  integer     NOT NULL DEFAULT 3600 CHECK (catchup_window_seconds >= 0),
    status                  text        NOT NULL DEFAULT 'active'
                                        CHECK (status IN ('active', 'paused', 'deleted')),
    -- NULL when the schedule has no further occurrence (ends_at passed).
    next_fire_at            timestamptz,
    last_fire_at            timestamptz,
    starts_at               timestamptz,
    ends_at                 timestamptz,
    signing_secret          text        NOT NULL,
    previous_signing_secret text,
    previous_secret_expires_at timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    deleted_at              timestamptz,
    CHECK (starts_at IS NULL OR ends_at IS NULL OR starts_at < ends_at)
);
-- The planner's only access path: active schedules by due time.
CREATE INDEX schedule_due_idx ON schedule (next_fire_at) WHERE status = 'active';
-- Keyset listing per tenant.
CREATE INDEX schedule_tenant_idx ON schedule (tenant_id, id);

CREATE TABLE job_run (
    id               uuid        NOT NULL,
    tenant_id        uuid        NOT NULL,
    schedule_id      uuid        NOT NULL,
    scheduled_for    timestamptz NOT NULL,
    idempotency_key  text        NOT NULL,
    trigger          text        NOT NULL DEFAULT 'schedule' CHECK (trigger IN ('schedule', 'manual')),
    status           text        NOT NULL DEFAULT 'pending'
                                 CHECK (status IN ('pending', 'running', 'retrying', 'succeeded',
                                                   'failed', 'skipped', 'cancelled')),
    attempt_count    smallint    NOT NULL DEFAULT 0 CHECK (attempt_count BETWEEN 0 AND 8),
    fire_after       timestamptz NOT NULL,
    claimed_by       text,
    claim_expires_at timestamptz,
    published_at     timestamptz,
    first_attempt_at timestamptz,
    finished_at      timestamptz,
    last_status_code smallint,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, scheduled_for),
    -- The hard guard against a second run of one occurrence (clock jumps, replans, races).
    CONSTRAINT job_run_occurrence_key UNIQUE (schedule_id, scheduled_for)
) PARTITION BY RANGE (scheduled_for);

-- The executor's claim paths: only runnable rows are indexed, so the indexes stay small.
CREATE INDEX job_run_claim_idx ON job_run (fire_after) WHERE status IN ('pending', 'retrying');
-- Per-tenant claim (fairness: one tenant's backlog must not starve another's single run).
CREATE INDEX job_run_claim_tenant_idx ON job_run (tenant_id, fire_after)
    WHERE status IN ('pending', 'retrying');
-- Expired leases of running rows are reclaimable by the claim query itself.
CREATE INDEX job_run_lease_idx ON job_run (claim_expires_at) WHERE status = 'running';
-- Tenant-wide history, newest first, keyset on (scheduled_for, id).
CREATE INDEX job_run_tenant_history_idx ON job_run (tenant_id, scheduled_for DESC, id DESC);
-- Kafka mode outbox: committed runs not yet published.
CREATE INDEX job_run_unpublished_idx ON job_run (created_at)
    WHERE published_at IS NULL AND status IN ('pending', 'retrying');

CREATE TABLE job_run_attempt (
    run_id           uuid        NOT NULL,
    scheduled_for    timestamptz NOT NULL,
    tenant_id        uuid        NOT NULL,
    attempt          smallint    NOT NULL CHECK (attempt BETWEEN 1 AND 8),
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL,
    outcome          text        NOT NULL,
    status_code      smallint,
    error            text,
    duration_ms      integer     NOT NULL CHECK (duration_ms >= 0),
    response_excerpt text        CHECK (octet_length(response_excerpt) <= 1024),
    claimed_by       text        NOT NULL,
    PRIMARY KEY (run_id, attempt, scheduled_for)
) PARTITION BY RANGE (scheduled_for);

CREATE TABLE target_breaker (
    tenant_id     uuid        NOT NULL,
    target_key    text        NOT NULL,
    state         text        NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open')),
    failures      integer     NOT NULL DEFAULT 0 CHECK (failures >= 0),
    opened_until  timestamptz,
    probe_by      text,
    probe_expires_at timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, target_key)
);
CREATE INDEX target_breaker_open_idx ON target_breaker (tenant_id) WHERE state <> 'closed';

-- Monthly partitions of job_run and job_run_attempt covering [from_month, from_month + months).
-- Idempotent; used by this migration and by the partition keeper.
CREATE FUNCTION cronwire_ensure_partitions(from_month date, months integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    created integer := 0;
    lo date;
    hi date;
    suffix text;
    parent text;
BEGIN
    FOR i IN 0 .. months - 1 LOOP
        lo := (date_trunc('month', from_month) + make_interval(months => i))::date;
        hi := (lo + interval '1 month')::date;
        suffix := to_char(lo, '"p"YYYY"_"MM');
        FOREACH parent IN ARRAY ARRAY['job_run', 'job_run_attempt'] LOOP
            IF to_regclass(parent || '_' || suffix) IS NULL THEN
                EXECUTE format(
                    'CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    parent || '_' || suffix, parent, lo::timestamp AT TIME ZONE 'UTC', hi::timestamp AT TIME ZONE 'UTC');
                created := created + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN created;
END
$$;

-- Last month (for catch-up after an outage across a month boundary), this month and two ahead.
SELECT cronwire_ensure_partitions((now() AT TIME ZONE 'UTC' - interval '1 month')::date, 4);
