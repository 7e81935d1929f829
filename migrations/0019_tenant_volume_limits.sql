-- Per-tenant volume limits (issue 46): a tenant's own cap on its runs not yet ended
-- (pending, running, retrying). NULL: SCHEDULER_TENANT_MAX_PENDING_RUNS. Backfill,
-- replay and trigger check it under a per-tenant advisory lock; the planner never does.
-- The count walks job_run_tenant_status_history_idx (tenant_id, status, ...) and stops at
-- the limit, so no new index of job_run is needed (every status change would pay for it).
ALTER TABLE tenant ADD COLUMN max_pending_runs integer CHECK (max_pending_runs > 0);
