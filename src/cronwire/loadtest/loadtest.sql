-- Load-test observation (the harness only; never used by serve). What it writes is
-- harness/seeding.sql's.

-- name: loadtest_unplanned
-- Schedules the planner has not yet moved past the horizon.
SELECT count(*) FROM schedule
WHERE tenant_id = $1 AND status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= $2

-- name: loadtest_unfinished
-- Runs up to the horizon that are not terminal yet.
SELECT count(*) FROM job_run
WHERE tenant_id = $1 AND scheduled_for <= $2
  AND status IN ('pending', 'running', 'retrying')

-- name: loadtest_run_counts
SELECT status, count(*) AS n FROM job_run
WHERE tenant_id = $1 AND scheduled_for <= $2
GROUP BY status

-- name: loadtest_materialised
-- Runs up to the horizon ($2) the planner had written by the first instant ($3), read once
-- the drain is over: created_at is now() of the planner transaction that wrote the run
-- (its start; the commit follows within the tick).
SELECT count(*) FROM job_run
 WHERE tenant_id = $1 AND scheduled_for <= $2 AND created_at <= $3

-- name: loadtest_last_planned_at
-- When the planner wrote the last run of the first instant: created_at is now() of the
-- planner transaction that wrote it (its start; the commit follows within the tick).
SELECT max(created_at) FROM job_run WHERE tenant_id = $1 AND scheduled_for = $2

-- name: loadtest_statements_extension
-- --statements (statements.py): the extension's view in the load test's database.
CREATE EXTENSION IF NOT EXISTS pg_stat_statements

-- name: loadtest_statements_reset
-- --statements: counting starts at the first instant.
SELECT pg_stat_statements_reset()

-- name: loadtest_statements_heaviest
-- --statements: this database's $1 heaviest statements by statement time since the reset.
SELECT query, calls, rows, total_exec_time
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
 ORDER BY total_exec_time DESC
 LIMIT $1

-- name: loadtest_wal
-- The WAL the whole server has written: the insert position (exact) and pg_stat_wal's
-- record and full-page-image counts (each backend reports them at most once a second).
-- Read at the first instant and after the drain, only on the Postgres the load test
-- started: on a shared server other work writes WAL too.
SELECT pg_current_wal_lsn()::text AS lsn, wal_records, wal_fpi FROM pg_stat_wal

-- name: loadtest_wal_since
-- The same counts, and the bytes of WAL written since the insert position $1.
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)::float8 AS bytes,
       wal_records, wal_fpi
  FROM pg_stat_wal

-- name: loadtest_analyze_schedules
-- Statistics for the schedules just written in one bulk insert, as autovacuum gives a
-- table within its first minute in a deployment. Without them, whether the burst ran
-- with statistics depended on whether autovacuum came during the warm-up, and a
-- schedule query on a partial index (the replicas' late-alert check) read every
-- schedule instead: 31 ms a call on 100,000 schedules against 0.005 ms with them.
ANALYZE schedule
