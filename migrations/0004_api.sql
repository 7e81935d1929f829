-- Tenant API (issue 5): an access path for "my failed runs, newest first".
--
-- job_run_tenant_history_idx (tenant_id, scheduled_for DESC, id DESC) already serves the
-- unfiltered history, and the occurrence key (schedule_id, scheduled_for) serves one
-- schedule's history (scheduled_for is unique per schedule, so no id is needed to order
-- it). A status filter over a tenant's whole history is the one query left: without this
-- index, "status=failed" on a tenant with a million succeeded runs walks them all.
-- status is already in the claim indexes' predicates, so status changes are never HOT
-- updates; this index adds one more entry to maintain per change, not a new kind of cost.
CREATE INDEX job_run_tenant_status_history_idx
    ON job_run (tenant_id, status, scheduled_for DESC, id DESC);
