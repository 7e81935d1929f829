-- A run that ends with an attempt keeps that attempt in its own row (ADR 0066). Until now
-- every attempt was a row of job_run_attempt, written beside the run's terminal update: a
-- second heap row and its index entry per delivered run, although the run's row already
-- holds nearly every field of its last attempt. From this migration job_run_resolve writes
-- the final attempt of a run that ends 'succeeded' or 'failed' into these columns of the
-- same row version it writes anyway; job_run_attempt keeps every other attempt (one
-- followed by a retry, one whose run was cancelled instead of retried). The view
-- run_attempt below shows both as one set, with job_run_attempt's columns.
--
-- last_outcome is the marker: set only by the new resolve, so a run ended before this
-- migration (its last attempt in job_run_attempt, these columns NULL) is never shown twice.
-- The attempt's own clock is kept (started_at and finished_at as the replica measured
-- them; job_run.finished_at is the database's), and its own error and status code (a run's
-- last_error can say something else: a superseded run's).
-- The excerpt is held to job_run_attempt's 1 KiB, as a constraint NOT VALID: it binds
-- every row written from now on (and every partition created later is checked whole),
-- while the rows already there, whose column is NULL, are not read under the upgrade's
-- lock to prove it.
ALTER TABLE job_run
    ADD COLUMN last_outcome           text,
    ADD COLUMN last_attempt_started   timestamptz,
    ADD COLUMN last_attempt_finished  timestamptz,
    ADD COLUMN last_response_excerpt  text;
ALTER TABLE job_run ADD CONSTRAINT job_run_last_response_excerpt_bytes
    CHECK (octet_length(last_response_excerpt) <= 1024) NOT VALID;

-- Every attempt of every run, as job_run_attempt's rows have always read: the history
-- API's attempt list, the chaos verdicts and the tests read this. A predicate on run_id,
-- scheduled_for and tenant_id reaches both sides (the run's primary key and the attempts'),
-- pruned to the run's month.
CREATE VIEW run_attempt AS
SELECT a.run_id, a.scheduled_for, a.tenant_id, a.attempt, a.started_at, a.finished_at,
       a.outcome, a.status_code, a.error, a.duration_ms, a.response_excerpt, a.claimed_by
  FROM job_run_attempt a
UNION ALL
SELECT r.id, r.scheduled_for, r.tenant_id, r.attempt_count, r.last_attempt_started,
       r.last_attempt_finished, r.last_outcome, r.last_status_code, r.last_error,
       r.last_duration_ms, r.last_response_excerpt, r.claimed_by
  FROM job_run r
 WHERE r.last_outcome IS NOT NULL;
