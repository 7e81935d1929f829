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

-- The overlap gate of the claim (ADR 0033), called by job_run_claim's shared tail (so by
-- every claim: polling, kafka keys, sweep) with the picked runs that are under an overlap
-- policy, as parallel arrays. domain/overlap.py states the same rules; the contract suite
-- holds the two to the same outcomes. It
--   * locks the schedules' rows (SKIP LOCKED: a row the planner, an edit or another claim
--     holds leaves its runs 'hold', untouched by this claim). A row lock reads the latest
--     committed overlap_run, so two claims never both find a gate free;
--   * finds whether the run holding each gate has ended: only if its row is terminal in
--     this statement's snapshot (taken after the lock: a volatile function's statement
--     gets its own). A row not found (written after the snapshot) still holds the gate;
--   * counts, for buffer policies, the runs waiting ahead of each candidate (earlier
--     occurrences already arrived and not started, the holder not counted, up to 101);
--   * decides each candidate's verdict: 'lease' (it starts), 'wait' (it stays runnable and
--     rests: the claim moves fire_after on), 'skipped' (skip_reason overlap), 'cancelled'
--     (cancel_other: a newer occurrence supersedes it) or 'hold';
--   * moves the gate to the newest run that starts.
-- A function, not CTEs of the claim: its plan exists and runs only when gated runs were
-- picked. Written as CTEs, its nodes cost every claim ~7 ms of backend CPU per 500 runs
-- even when no run was gated (executor start-up of its subplans); as a function called
-- with empty arrays, nothing measurable (benchmarks/bench_overlap_cost.py).
CREATE FUNCTION cronwire_overlap_gate(
    p_ids uuid[], p_ats timestamptz[], p_schedules uuid[], p_policies text[], p_running boolean[])
RETURNS TABLE (id uuid, scheduled_for timestamptz, verdict text, ahead bigint, busy boolean,
               overlap_run uuid, overlap_run_at timestamptz, overlap_policy text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    IF cardinality(p_ids) = 0 THEN
        RETURN;  -- nothing gated: the claim of 'allow' runs pays only this call
    END IF;
    RETURN QUERY
    WITH picked AS (
        SELECT * FROM unnest(p_ids, p_ats, p_schedules, p_policies, p_running)
            AS c(id, scheduled_for, schedule_id, overlap_policy, running)
    ),
    gate_lock AS MATERIALIZED (
        SELECT s.id, s.overlap_run, s.overlap_run_at
          FROM schedule s
         WHERE s.id = ANY (p_schedules)
           FOR NO KEY UPDATE SKIP LOCKED
    ),
    gate_view AS (
        SELECT p.id, p.scheduled_for, p.schedule_id, p.overlap_policy, p.running,
               g.id IS NOT NULL AS locked, g.overlap_run, g.overlap_run_at,
               (g.overlap_run IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM job_run o
                     WHERE o.id = g.overlap_run AND o.scheduled_for = g.overlap_run_at
                       AND o.status IN ('succeeded', 'failed', 'skipped', 'cancelled'))) AS occupied,
               -- Buffer policies: runs of the schedule waiting ahead of this one (earlier
               -- occurrences already arrived, not yet started), the occupant not counted.
               CASE WHEN p.overlap_policy IN ('buffer_one', 'buffer_all') THEN (
                   SELECT count(*) FROM (
                       SELECT 1 FROM job_run w
                        WHERE w.schedule_id = p.schedule_id AND w.overlap_policy IS NOT NULL
                          AND w.status IN ('pending', 'retrying')
                          AND w.scheduled_for < p.scheduled_for AND w.scheduled_for <= now()
                          AND w.id IS DISTINCT FROM g.overlap_run
                        LIMIT 101) ahead)
               ELSE 0 END AS earlier_waiting
          FROM picked p
          LEFT JOIN gate_lock g ON g.id = p.schedule_id
         WHERE p.overlap_policy IS NOT NULL
    ),
    gate_group AS (
        SELECT v.*,
               v.occupied AND v.overlap_run IS DISTINCT FROM v.id AS busy,
               min(v.scheduled_for) FILTER (WHERE NOT v.running)
                   OVER (PARTITION BY v.schedule_id) AS first_fresh,
               GREATEST(max(v.scheduled_for) FILTER (WHERE NOT v.running)
                            OVER (PARTITION BY v.schedule_id),
                        CASE WHEN v.occupied THEN v.overlap_run_at END) AS newest
          FROM gate_view v
    ),
    gate AS (
        SELECT v.id, v.scheduled_for, v.schedule_id, v.overlap_policy, v.busy, v.overlap_run,
               v.overlap_run_at,
               -- waiting ahead once started: when the gate is free, the earliest earlier
               -- run is the next to start (picked now, or woken and not claimed yet)
               v.earlier_waiting - CASE WHEN v.busy THEN 0 ELSE 1 END AS ahead,
               CASE
                 WHEN NOT v.locked THEN 'hold'
                 WHEN v.overlap_policy = 'cancel_other'
                   THEN CASE WHEN v.scheduled_for >= v.newest THEN 'lease' ELSE 'cancelled' END
                 WHEN v.id = v.overlap_run OR v.running THEN 'lease'
                 WHEN v.overlap_policy = 'skip'
                   THEN CASE WHEN v.busy OR v.scheduled_for > v.first_fresh THEN 'skipped'
                             ELSE 'lease' END
                 -- buffer_one (1 may wait) and buffer_all (100 may wait)
                 WHEN NOT v.busy AND v.earlier_waiting = 0 THEN 'lease'
                 WHEN v.earlier_waiting - CASE WHEN v.busy THEN 0 ELSE 1 END
                          >= CASE v.overlap_policy WHEN 'buffer_one' THEN 1 ELSE 100 END
                   THEN 'skipped'
                 ELSE 'wait'
               END AS verdict
          FROM gate_group v
    ),
    occupy AS (
        -- The run that holds the gate from now on: the newest one that starts.
        UPDATE schedule s
           SET overlap_run = n.id, overlap_run_at = n.scheduled_for
          FROM (SELECT DISTINCT ON (g.schedule_id) g.schedule_id, g.id, g.scheduled_for
                  FROM gate g WHERE g.verdict = 'lease'
                 ORDER BY g.schedule_id, g.scheduled_for DESC) n
         WHERE s.id = n.schedule_id AND s.overlap_run IS DISTINCT FROM n.id
    )
    SELECT g.id, g.scheduled_for, g.verdict, g.ahead, g.busy, g.overlap_run, g.overlap_run_at,
           g.overlap_policy
      FROM gate g;
END
$fn$;
