-- Kafka mode outbox, fair across tenants (issue 12, fairness fault). 0007's index answers
-- "the oldest due unpublished runs", so one tenant's 50,000-run burst was published
-- before a single run of any other tenant due a second later: in the chaos fairness fault
-- the small tenants' keys waited about 2 s behind it, while the polling claim (fair by
-- tenant) kept their lag near 50 ms. Ordered by tenant first, the same rows let the
-- publisher take each due tenant's oldest keys in turn (a loose index scan, as the
-- claim does over job_run_claim_tenant_idx). Same rows, same write cost: it replaces 0007's.
DROP INDEX IF EXISTS job_run_unpublished_due_idx;
CREATE INDEX job_run_unpublished_tenant_idx ON job_run (tenant_id, fire_after)
    WHERE published_at IS NULL AND status IN ('pending', 'retrying');
