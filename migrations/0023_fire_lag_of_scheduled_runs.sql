-- Fire lag is the scheduled runs' lag (issue 49): the stats leave out the lag of
-- backfilled, replayed and manual runs and of misfire catch-up runs (written after they
-- were due), so they read trigger and created_at. Both join the stats index's payload to
-- keep the read an index-only scan where the visibility map allows (ADR 0036).
DROP INDEX job_run_schedule_stats_idx;
CREATE INDEX job_run_schedule_stats_idx ON job_run (schedule_id, scheduled_for)
    INCLUDE (status, first_attempt_at, finished_at, last_duration_ms, trigger, created_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'cancelled');
