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
