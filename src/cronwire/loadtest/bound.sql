-- The machine's bound for the database half of the job (cronwire loadtest --compare):
-- the least a SKIP LOCKED queue must do per run, with no HTTP and no bookkeeping.

-- name: bound_create
CREATE TABLE IF NOT EXISTS bound_job (
    id        bigint PRIMARY KEY,
    status    text NOT NULL DEFAULT 'pending',
    claimed_by text,
    finished_at timestamptz
)

-- name: bound_index
CREATE INDEX IF NOT EXISTS bound_job_pending_idx ON bound_job (id) WHERE status = 'pending'

-- name: bound_fill
INSERT INTO bound_job (id) SELECT g FROM generate_series(1, $1::bigint) AS g

-- name: bound_claim
-- One batched claim: lock up to $2 pending rows, skipping locked ones, and take them.
UPDATE bound_job j SET status = 'running', claimed_by = $1
  FROM (SELECT id FROM bound_job WHERE status = 'pending' ORDER BY id LIMIT $2
        FOR UPDATE SKIP LOCKED) c
 WHERE j.id = c.id
RETURNING j.id

-- name: bound_finish
-- One batched terminal write, predicated on the claim as a lease would be.
UPDATE bound_job j SET status = 'succeeded', finished_at = now()
  FROM unnest($2::bigint[]) AS f(id)
 WHERE j.id = f.id AND j.claimed_by = $1 AND j.status = 'running'
