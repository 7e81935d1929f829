-- One index fewer on job_run (issue 29, ADR 0043). Every change of a run's status is a
-- non-HOT update (status is in the claim indexes' predicates), so each of the run's two
-- updates in a burst (the claim, the terminal write) and its insert writes an entry in
-- every index of job_run. job_run_tenant_history_idx (tenant_id, scheduled_for DESC,
-- id DESC) served one query, the unfiltered tenant history; job_run_tenant_status_history_idx
-- (tenant_id, status, scheduled_for DESC, id DESC) now serves it too, one descending scan
-- per status (job_run_list_for_tenant). Replicas of the previous version still answer
-- that query correctly while they last, by a slower plan.
DROP INDEX IF EXISTS job_run_tenant_history_idx;
