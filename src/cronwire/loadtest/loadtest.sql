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

-- name: loadtest_active_backends
-- --statements (waits.py): the statements running in this database now and what each
-- waits for (NULL: on the CPU). The sampler's own backend is left out.
SELECT query, wait_event_type, wait_event
  FROM pg_stat_activity
 WHERE datname = current_database() AND state = 'active'
   AND backend_type = 'client backend' AND pid <> pg_backend_pid()

-- name: loadtest_wal_extension
-- pg_walinspect reads the records of an LSN range from the WAL itself (superuser; only on
-- the Postgres the load test started).
CREATE EXTENSION IF NOT EXISTS pg_walinspect

-- name: loadtest_wal_position
-- The server's WAL insert position now (not pg_current_wal_lsn, the write position:
-- records no commit has flushed yet, such as those of a transaction still open, sit in the
-- WAL buffers until the WAL writer writes them, and a window read from write positions
-- would leave them out), and how far WAL is flushed.
SELECT pg_current_wal_insert_lsn()::text AS lsn, pg_current_wal_flush_lsn()::text AS flushed

-- name: loadtest_wal_flushed_to
-- Whether WAL is flushed up to $1 (pg_walinspect reads only flushed WAL).
SELECT pg_current_wal_flush_lsn() >= $1::text::pg_lsn

-- name: loadtest_wal_bytes
-- The bytes of WAL in [$1, $2) (exact from the positions alone).
SELECT pg_wal_lsn_diff($2::text::pg_lsn, $1::text::pg_lsn)::float8

-- name: loadtest_wal_between
-- The records and bytes of WAL in [$1, $2), counted from the WAL itself. pg_stat_wal's
-- counts were not: each backend adds its own at most once a second while busy and ten
-- seconds after it went idle, so a drain's last writes were missing from them (once
-- 0.3 records per run in kafka mode).
SELECT coalesce(sum(count), 0)::bigint AS records,
       pg_wal_lsn_diff($2::text::pg_lsn, $1::text::pg_lsn)::float8 AS bytes
  FROM pg_get_wal_stats($1::text::pg_lsn, $2::text::pg_lsn)

-- name: loadtest_analyze_schedules
-- Statistics for the schedules just written in one bulk insert, as autovacuum gives a
-- table within its first minute in a deployment. Without them, whether the burst ran
-- with statistics depended on whether autovacuum came during the warm-up, and a
-- schedule query on a partial index (the replicas' late-alert check) read every
-- schedule instead: 31 ms a call on 100,000 schedules against 0.005 ms with them.
ANALYZE schedule
