-- Scheduling semantics (issue 25): overlap policy, jitter, one-time and limited schedules,
-- pause notes and pause-after-failures, backfill and replay. Every new column has a
-- constant default or none, so no partition of job_run is rewritten; the CHECKs that
-- change are validated once over the existing rows.

-- schedule --------------------------------------------------------------------------

-- What a new occurrence does while the schedule's previous run is running or retrying
-- (ADR 0033). 'allow' is today's behaviour and costs the claim nothing.
ALTER TABLE schedule ADD COLUMN overlap_policy text NOT NULL DEFAULT 'allow'
    CHECK (overlap_policy IN ('allow', 'skip', 'buffer_one', 'buffer_all', 'cancel_other'));
-- Each occurrence is delivered at scheduled_for + a deterministic offset in [0, jitter).
ALTER TABLE schedule ADD COLUMN jitter_seconds integer NOT NULL DEFAULT 0
    CHECK (jitter_seconds BETWEEN 0 AND 3600);
-- A one-time schedule (the API's `at`) has run_at instead of cron: exactly one of the two.
ALTER TABLE schedule ADD COLUMN run_at timestamptz;
ALTER TABLE schedule ALTER COLUMN cron DROP NOT NULL;
ALTER TABLE schedule ADD CONSTRAINT schedule_cron_or_run_at
    CHECK ((cron IS NULL) <> (run_at IS NULL));
-- Completed after max_runs scheduled occurrences; runs_planned counts them (the planner
-- adds to it in the transaction that writes them, so the count is exact across replicas).
ALTER TABLE schedule ADD COLUMN max_runs integer CHECK (max_runs BETWEEN 1 AND 1000000);
ALTER TABLE schedule ADD COLUMN runs_planned integer NOT NULL DEFAULT 0
    CHECK (runs_planned >= 0);
-- Paused by itself after this many consecutive failed runs (decided by the statement
-- that writes the failed state); consecutive_failures is the running count.
ALTER TABLE schedule ADD COLUMN pause_after_failures integer
    CHECK (pause_after_failures BETWEEN 1 AND 100);
ALTER TABLE schedule ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0
    CHECK (consecutive_failures >= 0);
-- Why and since when the schedule is paused: the tenant's note, or the automatic pause's
-- explanation. Cleared by a resume.
ALTER TABLE schedule ADD COLUMN paused_reason text;
ALTER TABLE schedule ADD COLUMN paused_at timestamptz;
-- The run that holds the schedule's overlap gate: the last run an overlap policy let
-- start (id and scheduled_for, job_run's primary key). Written only by the claim, under
-- the schedule row's lock; it holds the gate until that run is terminal.
ALTER TABLE schedule ADD COLUMN overlap_run uuid;
ALTER TABLE schedule ADD COLUMN overlap_run_at timestamptz;

ALTER TABLE schedule DROP CONSTRAINT schedule_status_check;
ALTER TABLE schedule ADD CONSTRAINT schedule_status_check
    CHECK (status IN ('active', 'paused', 'completed', 'deleted'));

-- A success resets the failure count only where it is not zero: this index holds just
-- those schedules, so the resolve statement's reset probes it instead of every schedule.
CREATE INDEX schedule_failing_idx ON schedule (id) WHERE consecutive_failures > 0;

-- job_run ---------------------------------------------------------------------------

ALTER TABLE job_run DROP CONSTRAINT job_run_trigger_check;
ALTER TABLE job_run ADD CONSTRAINT job_run_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'backfill', 'replay'));

-- Why a skipped run was skipped: 'misfire' (the misfire policy dropped it) or 'overlap'
-- (the overlap policy did). The misfire skips written before this migration are those.
ALTER TABLE job_run ADD COLUMN skip_reason text;
UPDATE job_run SET skip_reason = 'misfire' WHERE status = 'skipped' AND skip_reason IS NULL;

-- The overlap policy a run was planned under; NULL for 'allow' and for manual and replay
-- runs, which are never gated.
ALTER TABLE job_run ADD COLUMN overlap_policy text
    CHECK (overlap_policy IN ('skip', 'buffer_one', 'buffer_all', 'cancel_other'));

-- A replay repeats a failed run: replay_of and replay_of_scheduled_for are the original's
-- primary key (its occurrence is what the replay delivers in x-cronwire-scheduled-for);
-- replayed_by on the original names its replay, so one failed run is replayed once
-- however many requests race (a conditional update decides).
ALTER TABLE job_run ADD COLUMN replay_of uuid;
ALTER TABLE job_run ADD COLUMN replay_of_scheduled_for timestamptz;
ALTER TABLE job_run ADD COLUMN replayed_by uuid;

-- The gate counts and wakes a schedule's waiting runs in occurrence order. Only gated runs
-- that are runnable are indexed, so runs under 'allow' add no index entry here.
CREATE INDEX job_run_overlap_idx ON job_run (schedule_id, scheduled_for)
    WHERE overlap_policy IS NOT NULL AND status IN ('pending', 'retrying');
-- Dead letters not yet replayed, per tenant, for the bulk replay.
CREATE INDEX job_run_dead_letter_idx ON job_run (tenant_id, scheduled_for)
    WHERE status = 'failed' AND replayed_by IS NULL;
