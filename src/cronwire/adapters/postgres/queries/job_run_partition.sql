-- The monthly partitions of job_run and job_run_attempt, read from the catalog. Any
-- replica may run the upkeep; the keeper takes an advisory lock (database.sql) so only one
-- does the DDL at a time.

-- name: job_run_partition_bounds
-- [lower_bound, upper_bound) of every attached job_run range partition, from the catalog
-- (not from partition names): pg_get_expr gives "FOR VALUES FROM ('<lo>') TO ('<hi>')".
-- A partition being detached ("detach pending") takes no new rows, so it does not count;
-- DEFAULT and MINVALUE/MAXVALUE bounds do not match and are left out. split_part, not a
-- regular expression: about 0.4 ms per call instead of 3 ms (ADR 0010).
SELECT split_part(e, '''', 2)::timestamptz AS lower_bound,
       split_part(e, '''', 4)::timestamptz AS upper_bound
FROM (
    SELECT pg_get_expr(c.relpartbound, c.oid) AS e
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'job_run'::regclass AND NOT i.inhdetachpending
) AS bounds
WHERE e LIKE 'FOR VALUES FROM (''%'') TO (''%'')'

-- name: job_run_partition_ensure
-- Every month retention keeps ($2 months, this one counting as one: a backfill may write
-- anywhere in them, and the migration made only last month), this month and $1 ahead.
SELECT cronwire_ensure_partitions(
    (date_trunc('month', now() AT TIME ZONE 'UTC') - make_interval(months => $2::integer - 1))::date,
    $2::integer + $1::integer)

-- name: job_run_partition_expired_detach_statements
-- Partitions entirely older than the first kept month, as ready-to-run DETACH statements
-- (%I quotes identifiers; DETACH ... CONCURRENTLY cannot run inside a function).
SELECT c.relname AS partition,
       format('ALTER TABLE %I DETACH PARTITION %I CONCURRENTLY', p.relname, c.relname) AS detach_sql,
       format('DROP TABLE IF EXISTS %I', c.relname) AS drop_sql
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname IN ('job_run', 'job_run_attempt')
  AND c.relname ~ '_p[0-9]{4}_[0-9]{2}$'
  AND NOT i.inhdetachpending  -- an interrupted detach is finished by FINALIZE instead
  AND to_date(right(c.relname, 7), 'YYYY_MM')
      < (date_trunc('month', now() AT TIME ZONE 'UTC') - make_interval(months => $1::integer - 1))::date
  -- A month still holding a run that is not finished keeps both of its partitions (the
  -- run and its attempts): retention deletes history, never work. The range scan on the
  -- parent is pruned to that month's partition.
  AND NOT EXISTS (
      SELECT 1 FROM job_run r
      WHERE r.status IN ('pending', 'running', 'retrying')
        AND r.scheduled_for >= to_date(right(c.relname, 7), 'YYYY_MM')::timestamp AT TIME ZONE 'UTC'
        AND r.scheduled_for < (to_date(right(c.relname, 7), 'YYYY_MM') + interval '1 month')::timestamp AT TIME ZONE 'UTC')
ORDER BY c.relname

-- name: job_run_partition_pending_detach_statements
-- An expired partition whose DETACH ... CONCURRENTLY was interrupted (cancelled, backend
-- terminated, server restarted) stays "detach pending": it takes no new rows, and any
-- further DETACH of it fails, asking for FINALIZE. Finish it, then drop it.
SELECT c.relname AS partition,
       format('ALTER TABLE %I DETACH PARTITION %I FINALIZE', p.relname, c.relname) AS finalize_sql,
       format('DROP TABLE IF EXISTS %I', c.relname) AS drop_sql
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname IN ('job_run', 'job_run_attempt')
  AND c.relname ~ '_p[0-9]{4}_[0-9]{2}$'
  AND i.inhdetachpending
  AND to_date(right(c.relname, 7), 'YYYY_MM')
      < (date_trunc('month', now() AT TIME ZONE 'UTC') - make_interval(months => $1::integer - 1))::date
ORDER BY c.relname

-- name: job_run_partition_detached_leftovers
-- A detach whose DROP did not follow (a crash between the two) leaves the table detached
-- but not dropped; drop it on the next pass.
SELECT c.relname AS partition, format('DROP TABLE IF EXISTS %I', c.relname) AS drop_sql
FROM pg_class c
WHERE c.relkind = 'r'
  AND c.relnamespace = 'public'::regnamespace
  AND c.relname ~ '^job_run(_attempt)?_p[0-9]{4}_[0-9]{2}$'
  AND NOT c.relispartition
  AND to_date(right(c.relname, 7), 'YYYY_MM')
      < (date_trunc('month', now() AT TIME ZONE 'UTC') - make_interval(months => $1::integer - 1))::date

-- name: job_run_partition_list
SELECT p.relname AS parent, c.relname AS partition
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname IN ('job_run', 'job_run_attempt')
ORDER BY p.relname, c.relname

-- name: job_run_partition_months_ahead
-- The first month from the current one (k = 0) lacking a job_run or job_run_attempt
-- partition, minus one: 2 when this month and the next two exist, -1 when this one is missing.
SELECT coalesce(min(k), 13) - 1 AS months_ahead
FROM generate_series(0, 12) AS k
WHERE to_regclass(format('job_run_p%s', to_char(date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => k), 'YYYY_MM'))) IS NULL
   OR to_regclass(format('job_run_attempt_p%s', to_char(date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => k), 'YYYY_MM'))) IS NULL
