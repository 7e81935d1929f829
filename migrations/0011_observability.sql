-- Knowing what fired (issue 26): per-schedule stats, alerts. ADR 0036.
-- Nullable columns and constant defaults: adding them rewrites no table or partition.

-- Stats. The duration of the attempt that ended the run, written by the terminal write
-- from the attempt it records (the run's evidence row has it too, but job_run_attempt has
-- no schedule column: a schedule's durations would be a join over every attempt).
ALTER TABLE job_run ADD COLUMN last_duration_ms integer;

-- One schedule's finished runs in a window, with everything the stats aggregate, from the
-- index alone (an index-only scan where the visibility map allows): counts by status,
-- fire lag (first_attempt_at - scheduled_for), durations, last success and failure.
-- Partial on the terminal statuses: a run enters it once, at the write that ends it (or
-- at its insert when it is skipped), not at its insert, its claim and its end as an
-- unconditional index would (three entries per run on the burst's hottest table). The
-- few unfinished runs are counted apart (job_run_stats_unfinished). ADR 0036.
CREATE INDEX job_run_schedule_stats_idx ON job_run (schedule_id, scheduled_for)
    INCLUDE (status, first_attempt_at, finished_at, last_duration_ms)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'cancelled');

-- Alerts: the per-schedule rules (NULL: no such alert) and the state that makes each
-- event fire once per transition. Every replica may see the same transition; the state
-- is changed by one conditional UPDATE in the transaction that decides it (the terminal
-- write for failing/recovered/slow, the periodic check for late), so exactly one of them
-- inserts the event.
ALTER TABLE schedule
    ADD COLUMN alert_after_failures     integer CHECK (alert_after_failures BETWEEN 1 AND 1000),
    ADD COLUMN alert_late_after_seconds integer CHECK (alert_late_after_seconds BETWEEN 1 AND 2592000),
    ADD COLUMN alert_max_duration_ms    integer CHECK (alert_max_duration_ms BETWEEN 1 AND 86400000),
    -- consecutive failed runs, counted for alerts only (issue 25's consecutive_failures,
    -- for pause_after_failures, counts the same thing: see ADR 0036 on merging them)
    ADD COLUMN alert_failures integer NOT NULL DEFAULT 0 CHECK (alert_failures >= 0),
    ADD COLUMN alert_failing  boolean NOT NULL DEFAULT false,
    ADD COLUMN alert_slow     boolean NOT NULL DEFAULT false,
    ADD COLUMN alert_late     boolean NOT NULL DEFAULT false;
-- The periodic late check reads only schedules that have the rule.
CREATE INDEX schedule_alert_late_idx ON schedule (id) WHERE alert_late_after_seconds IS NOT NULL;
-- The terminal write looks up the schedules of its batch that have a failing or slow rule:
-- a probe into this (nearly empty) index, not into the primary key, for each of them.
CREATE INDEX schedule_alert_rules_idx ON schedule (id)
    WHERE alert_after_failures IS NOT NULL OR alert_max_duration_ms IS NOT NULL;

-- A tenant's alert destination: one URL, the event types it wants, its own secret.
CREATE TABLE tenant_alert_destination (
    tenant_id      uuid        PRIMARY KEY REFERENCES tenant (id) ON DELETE CASCADE,
    url            text        NOT NULL,
    events         text[]      NOT NULL,
    signing_secret text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- One row per transition, delivered like a run: claimed with a lease (SKIP LOCKED),
-- retried with backoff, each attempt recorded. 'undelivered': the tenant had no
-- destination for this type when the event happened (listed, never sent).
CREATE TABLE alert_event (
    id               uuid        PRIMARY KEY,
    tenant_id        uuid        NOT NULL REFERENCES tenant (id) ON DELETE CASCADE,
    schedule_id      uuid        NOT NULL,
    schedule_name    text        NOT NULL,
    type             text        NOT NULL CHECK (type IN ('schedule.failing', 'schedule.recovered',
                                                          'schedule.late', 'schedule.slow',
                                                          'schedule.paused')),
    run_id           uuid,
    at               timestamptz NOT NULL DEFAULT now(),
    detail           jsonb       NOT NULL DEFAULT '{}',
    status           text        NOT NULL DEFAULT 'pending'
                                 CHECK (status IN ('pending', 'delivering', 'retrying',
                                                   'delivered', 'failed', 'undelivered')),
    attempt_count    smallint    NOT NULL DEFAULT 0 CHECK (attempt_count BETWEEN 0 AND 8),
    fire_after       timestamptz NOT NULL DEFAULT now(),
    claimed_by       text,
    claim_expires_at timestamptz,
    lease_generation bigint      NOT NULL DEFAULT 0,
    last_status_code smallint,
    last_error       text,
    delivered_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alert_event_due_idx ON alert_event (fire_after)
    WHERE status IN ('pending', 'retrying', 'delivering');
CREATE INDEX alert_event_tenant_idx ON alert_event (tenant_id, created_at DESC, id DESC);

CREATE TABLE alert_event_attempt (
    event_id         uuid        NOT NULL REFERENCES alert_event (id) ON DELETE CASCADE,
    attempt          smallint    NOT NULL CHECK (attempt BETWEEN 1 AND 8),
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL,
    outcome          text        NOT NULL,
    status_code      smallint,
    error            text,
    duration_ms      integer     NOT NULL CHECK (duration_ms >= 0),
    response_excerpt text        CHECK (octet_length(response_excerpt) <= 1024),
    PRIMARY KEY (event_id, attempt)
);
