-- The server itself, no table: its clock and its advisory locks.

-- name: database_now
-- The one clock authority for due decisions.
SELECT now()

-- name: database_ping
-- Readiness: the pool hands out a connection that answers.
SELECT true

-- name: advisory_lock
-- Session-level, waiting: the migrator's (one migrating process at a time).
SELECT pg_advisory_lock($1)

-- name: advisory_try_lock
-- Session-level, not waiting: the partition keeper's (another replica holds it: skip).
SELECT pg_try_advisory_lock($1)

-- name: advisory_unlock
SELECT pg_advisory_unlock($1)

-- name: database_wal_position
-- How far this server's data reaches in the WAL: a primary's insert position (every
-- commit acknowledged so far lies before it), a standby's replay position (every commit
-- replayed so far is visible to its queries). The read side compares the two (ADR 0039).
SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
            ELSE pg_current_wal_insert_lsn() END
