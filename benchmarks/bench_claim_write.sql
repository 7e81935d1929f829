-- benchmarks/bench_claim_write.py: the claim and the terminal write reduced to the lease,
-- in two shapes. Neither is production SQL (that is job_run_claim / job_run_resolve, which
-- the benchmark runs as its third shape); they isolate what the row versions and index
-- entries of each shape cost.

-- name: bench_runs_for_schedules
-- One run per seeded schedule, due $1 (the burst's instant).
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, fire_after)
SELECT gen_random_uuid(), s.tenant_id, s.id, $1, 'bench-' || s.id, $1
  FROM schedule s

-- name: bench_status_claim
-- The lease as today: the status moves to 'running' with the owner, its generation and
-- expiry, in one update of the locked rows (non-HOT: the status is indexed).
UPDATE job_run j
   SET status = 'running', claimed_by = $1, claim_expires_at = now() + interval '30 s',
       lease_generation = j.lease_generation + 1, attempt_count = j.attempt_count + 1,
       first_attempt_at = COALESCE(j.first_attempt_at, now()), updated_at = now()
  FROM (SELECT id, scheduled_for FROM job_run
         WHERE status IN ('pending', 'retrying') AND fire_after <= now()
           AND (claim_expires_at IS NULL OR claim_expires_at < now())
         ORDER BY fire_after LIMIT $2 FOR UPDATE SKIP LOCKED) c
 WHERE j.id = c.id AND j.scheduled_for = c.scheduled_for
RETURNING j.id, j.scheduled_for, j.lease_generation

-- name: bench_status_write
-- The terminal write predicated on the lease (rule 3), with its attempt row.
WITH done AS (
    UPDATE job_run j
       SET status = 'succeeded', finished_at = now(), last_status_code = 200,
           last_duration_ms = 1, claim_expires_at = NULL, updated_at = now()
      FROM unnest($2::uuid[], $3::timestamptz[], $4::bigint[]) AS f(id, at, generation)
     WHERE j.id = f.id AND j.scheduled_for = f.at AND j.claimed_by = $1
       AND j.status = 'running' AND j.lease_generation = f.generation
    RETURNING j.id, j.scheduled_for, j.tenant_id, j.attempt_count)
INSERT INTO job_run_attempt (run_id, scheduled_for, tenant_id, attempt, started_at,
                             finished_at, outcome, status_code, duration_ms, claimed_by)
SELECT id, scheduled_for, tenant_id, attempt_count, now(), now(), 'success', 200, 1, $1
  FROM done

-- name: bench_lease_table
-- The alternative: the lease in a table of its own, so taking it leaves job_run's indexed
-- columns alone. The primary key is the guard against a second lease.
CREATE TABLE IF NOT EXISTS bench_job_run_lease (
    run_id           uuid        PRIMARY KEY,
    scheduled_for    timestamptz NOT NULL,
    claimed_by       text        NOT NULL,
    lease_generation bigint      NOT NULL,
    claim_expires_at timestamptz NOT NULL
)

-- name: bench_lease_claim
-- Runs still pending in job_run and not leased, locked where read (SKIP LOCKED), leased
-- by one insert. A lease committed after this statement's snapshot is caught by the key.
WITH c AS (
    SELECT r.id, r.scheduled_for, r.lease_generation FROM job_run r
     WHERE r.status IN ('pending', 'retrying') AND r.fire_after <= now()
       AND NOT EXISTS (SELECT 1 FROM bench_job_run_lease l WHERE l.run_id = r.id)
     ORDER BY r.fire_after LIMIT $2 FOR UPDATE SKIP LOCKED)
INSERT INTO bench_job_run_lease
SELECT id, scheduled_for, $1, lease_generation + 1, now() + interval '30 s' FROM c
    ON CONFLICT DO NOTHING
RETURNING run_id AS id, scheduled_for, lease_generation

-- name: bench_lease_write
-- The lease deleted where it is still ours, the run made terminal, its attempt row.
WITH gone AS (
    DELETE FROM bench_job_run_lease l
     USING unnest($2::uuid[], $3::timestamptz[], $4::bigint[]) AS f(id, at, generation)
     WHERE l.run_id = f.id AND l.claimed_by = $1 AND l.lease_generation = f.generation
    RETURNING l.run_id, l.scheduled_for, l.lease_generation),
done AS (
    UPDATE job_run j
       SET status = 'succeeded', attempt_count = j.attempt_count + 1,
           first_attempt_at = now(), finished_at = now(), last_status_code = 200,
           last_duration_ms = 1, lease_generation = g.lease_generation, claimed_by = $1,
           updated_at = now()
      FROM gone g
     WHERE j.id = g.run_id AND j.scheduled_for = g.scheduled_for
    RETURNING j.id, j.scheduled_for, j.tenant_id, j.attempt_count)
INSERT INTO job_run_attempt (run_id, scheduled_for, tenant_id, attempt, started_at,
                             finished_at, outcome, status_code, duration_ms, claimed_by)
SELECT id, scheduled_for, tenant_id, attempt_count, now(), now(), 'success', 200, 1, $1
  FROM done

-- name: bench_counts
SELECT (SELECT count(*) FROM job_run WHERE status = 'succeeded') AS succeeded,
       (SELECT count(*) FROM run_attempt) AS attempts,
       (SELECT count(DISTINCT run_id) FROM run_attempt) AS attempted_runs

-- name: bench_fillfactor
-- Room on job_run's pages (each partition's fillfactor, set before the runs are written):
-- an update can put the new row version on the same page.
DO $$
DECLARE p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'job_run'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = %s)', p,
                       current_setting('cronwire.bench_fillfactor'));
    END LOOP;
END $$

-- name: bench_hot_prepare
-- The third alternative: the lease in columns no index reads, so that taking it can be a
-- heap-only (HOT) update: no index entry, the new version on the same page (which needs
-- room there: --fillfactor). job_run_lease_idx goes (an expired lease is found by the
-- claim's own scan: a pending row whose claim_expires_at has passed), and
-- first_attempt_at, which job_run_schedule_stats_idx includes, is written by the terminal
-- write instead.
DROP INDEX job_run_lease_idx

-- name: bench_hot_claim
-- The status stays 'pending': the lease is claimed_by, its generation and expiry. A run
-- is claimable when it has no lease or its lease expired (the same test as today's).
UPDATE job_run j
   SET claimed_by = $1, claim_expires_at = now() + interval '30 s',
       lease_generation = j.lease_generation + 1, attempt_count = j.attempt_count + 1,
       updated_at = now()
  FROM (SELECT id, scheduled_for FROM job_run
         WHERE status IN ('pending', 'retrying') AND fire_after <= now()
           AND (claim_expires_at IS NULL OR claim_expires_at < now())
         ORDER BY fire_after LIMIT $2 FOR UPDATE SKIP LOCKED) c
 WHERE j.id = c.id AND j.scheduled_for = c.scheduled_for
RETURNING j.id, j.scheduled_for, j.lease_generation

-- name: bench_hot_write
-- The terminal write predicated on the lease: still pending, ours, this generation.
WITH done AS (
    UPDATE job_run j
       SET status = 'succeeded', first_attempt_at = COALESCE(j.first_attempt_at, now()),
           finished_at = now(), last_status_code = 200, last_duration_ms = 1,
           claim_expires_at = NULL, updated_at = now()
      FROM unnest($2::uuid[], $3::timestamptz[], $4::bigint[]) AS f(id, at, generation)
     WHERE j.id = f.id AND j.scheduled_for = f.at AND j.claimed_by = $1
       AND j.status IN ('pending', 'retrying') AND j.lease_generation = f.generation
    RETURNING j.id, j.scheduled_for, j.tenant_id, j.attempt_count)
INSERT INTO job_run_attempt (run_id, scheduled_for, tenant_id, attempt, started_at,
                             finished_at, outcome, status_code, duration_ms, claimed_by)
SELECT id, scheduled_for, tenant_id, attempt_count, now(), now(), 'success', 200, 1, $1
  FROM done

-- name: bench_hot_updates
-- How many of the table's updates were heap-only (the shape's premise), every partition.
SELECT COALESCE(sum(n_tup_upd), 0)::bigint AS updates,
       COALESCE(sum(n_tup_hot_upd), 0)::bigint AS hot
  FROM pg_stat_user_tables
 WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'job_run'::regclass)
