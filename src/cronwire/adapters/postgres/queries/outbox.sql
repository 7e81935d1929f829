-- Kafka mode's outbox on job_run.published_at: a runnable run's key is published once it
-- is due, and published_at is reset whenever the run becomes runnable again (retry,
-- release, defer: see executor.sql), so no key reaches a consumer before its run can be
-- claimed. Served by job_run_unpublished_due_idx (migration 0007).

-- name: job_run_outbox_take
-- $1 limit. Due, unpublished, runnable runs, oldest first, locked for the publishing
-- transaction; SKIP LOCKED so the publishers of several replicas split the work.
SELECT r.id, r.scheduled_for, r.tenant_id
  FROM job_run r
 WHERE r.published_at IS NULL AND r.status IN ('pending', 'retrying')
   AND r.fire_after <= now()
 ORDER BY r.fire_after
 LIMIT $1
   FOR UPDATE SKIP LOCKED

-- name: job_run_outbox_mark
-- $1 run ids, $2 their scheduled_for: the keys the broker acknowledged.
UPDATE job_run j
   SET published_at = now()
  FROM unnest($1::uuid[], $2::timestamptz[]) AS k(id, scheduled_for)
 WHERE j.id = k.id AND j.scheduled_for = k.scheduled_for

-- name: job_run_outbox_next_due
-- Seconds until the earliest unpublished runnable run is due (negative when overdue,
-- NULL when there is none): the publisher sleeps exactly that long.
SELECT EXTRACT(EPOCH FROM (min(fire_after) - now()))::float8
  FROM job_run
 WHERE published_at IS NULL AND status IN ('pending', 'retrying')
