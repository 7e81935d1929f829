-- Lease identity, attempt accounting and cancel-after-delete on job_run (issue 8).
-- Constant defaults: adding these columns rewrites no partition.

-- Lease generation: every claim of a run adds one, and every write on a leased run
-- (renew, resolve, release, defer, fail) names the generation it holds. claimed_by alone
-- cannot tell two processes that share an instance id apart (a copied config, pid 1 in
-- every container), nor an owner's stale lease on a run it has re-claimed since.
ALTER TABLE job_run ADD COLUMN lease_generation bigint NOT NULL DEFAULT 0;

-- Set by the lease renewal once the current lease's request has started; every claim
-- clears it. An expired lease whose request never started (the owner died between claim
-- and send, a deferral or release write failed, the claim's reply was lost) has not used
-- its attempt: the claim re-delivers it under the same attempt number, and never fails it
-- as exhausted. Rows running when this migration applies count as not started.
ALTER TABLE job_run ADD COLUMN attempt_started boolean NOT NULL DEFAULT false;

-- Set by a schedule delete on the runs that were running at that moment: their request
-- in flight is finished and recorded, but no further attempt starts (a retry, a release
-- or a re-claim of the expired lease ends the run 'cancelled' instead).
ALTER TABLE job_run ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
