-- audit_event: one row per change, written in the change's own transaction (ADR 0056).

-- name: audit_event_insert
INSERT INTO audit_event (tenant_id, actor, action, object_type, object_id, request_id,
                         client_address, changes)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)

-- name: audit_event_list
-- Newest first, keyset on (at, id) strictly before ($6, $7); every filter optional. The
-- primary key (tenant_id, at, id) serves the walk, and `at` bounds prune partitions.
SELECT id, at, actor, action, object_type, object_id, request_id, client_address, changes
  FROM audit_event
 WHERE tenant_id = $1
   AND at >= coalesce($2::timestamptz, '-infinity')
   AND at < coalesce($3::timestamptz, 'infinity')
   AND ($4::text IS NULL OR object_id = $4)
   AND ($5::text IS NULL OR action = $5)
   AND (at, id) < ($6::timestamptz, $7::uuid)
 ORDER BY at DESC, id DESC
 LIMIT $8

-- name: audit_event_partition_ensure
-- This month and $1 ahead (rows are written at the transaction's now(), never earlier).
SELECT cronwire_ensure_audit_partitions(date_trunc('month', now() AT TIME ZONE 'UTC')::date,
                                        $1::integer + 1)

-- name: audit_event_partition_expired
-- Partitions whose whole month ended more than $1 days ago (SCHEDULER_AUDIT_RETENTION_DAYS),
-- as ready-to-run statements (DETACH ... CONCURRENTLY cannot run inside a function).
SELECT c.relname AS partition,
       format('ALTER TABLE audit_event DETACH PARTITION %I CONCURRENTLY', c.relname) AS detach_sql,
       format('DROP TABLE IF EXISTS %I', c.relname) AS drop_sql
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'audit_event'::regclass
   AND c.relname ~ '^audit_event_p[0-9]{4}_[0-9]{2}$'
   AND NOT i.inhdetachpending
   AND (to_date(right(c.relname, 7), 'YYYY_MM') + interval '1 month')::timestamp AT TIME ZONE 'UTC'
       <= now() - make_interval(days => $1)
 ORDER BY c.relname

-- name: audit_event_partition_pending_detach
-- An interrupted DETACH ... CONCURRENTLY of an expired partition: finish it, then drop.
SELECT c.relname AS partition,
       format('ALTER TABLE audit_event DETACH PARTITION %I FINALIZE', c.relname) AS finalize_sql,
       format('DROP TABLE IF EXISTS %I', c.relname) AS drop_sql
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'audit_event'::regclass AND i.inhdetachpending
 ORDER BY c.relname

-- name: audit_event_delete_expired
-- Inside the oldest month kept: up to $2 rows older than $1 days (the caller repeats while
-- a batch comes back full). The `at` bound prunes the scan to that partition.
WITH expired AS (
    SELECT tenant_id, at, id
      FROM audit_event
     WHERE at < now() - make_interval(days => $1)
     ORDER BY at
     LIMIT $2
)
DELETE FROM audit_event a
 USING expired
 WHERE (a.tenant_id, a.at, a.id) = (expired.tenant_id, expired.at, expired.id)

-- name: audit_event_partition_list
SELECT c.relname AS partition
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'audit_event'::regclass
 ORDER BY c.relname
