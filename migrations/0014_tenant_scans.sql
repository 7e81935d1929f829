-- The two loose index scans over tenants, written once each as views. Until now
-- job_run.sql spelled the recursive CTE out three times (the polling claim, and both the
-- outbox's take and its next-due query). Each view lists every tenant with runnable runs
-- once, with its earliest fire_after (due or not yet), at one index probe per tenant:
-- the index is ordered by tenant first, so a plain GROUP BY or min() would read every row.
-- A filter on fire_after applies to the CTE's rows as the inline CTEs' did: the plans are
-- the same. No data changes; replicas of the previous version do not read the views.

-- The polling claim's fair share (job_run_claim), over job_run_claim_tenant_idx.
CREATE VIEW job_run_runnable_tenants AS
WITH RECURSIVE runnable_tenants AS (
    (SELECT r.tenant_id, r.fire_after
       FROM job_run r
      WHERE r.status IN ('pending', 'retrying')
      ORDER BY r.tenant_id, r.fire_after
      LIMIT 1)
    UNION ALL
    SELECT nxt.tenant_id, nxt.fire_after
      FROM runnable_tenants t
     CROSS JOIN LATERAL (
        SELECT r.tenant_id, r.fire_after
          FROM job_run r
         WHERE r.status IN ('pending', 'retrying') AND r.tenant_id > t.tenant_id
         ORDER BY r.tenant_id, r.fire_after
         LIMIT 1) nxt
)
SELECT tenant_id, fire_after FROM runnable_tenants;

-- Kafka mode's outbox (job_run_outbox_take, job_run_outbox_next_due), over
-- job_run_unpublished_tenant_idx (migration 0009).
CREATE VIEW job_run_unpublished_tenants AS
WITH RECURSIVE unpublished_tenants AS (
    (SELECT r.tenant_id, r.fire_after
       FROM job_run r
      WHERE r.published_at IS NULL AND r.status IN ('pending', 'retrying')
      ORDER BY r.tenant_id, r.fire_after
      LIMIT 1)
    UNION ALL
    SELECT nxt.tenant_id, nxt.fire_after
      FROM unpublished_tenants t
     CROSS JOIN LATERAL (
        SELECT r.tenant_id, r.fire_after
          FROM job_run r
         WHERE r.published_at IS NULL AND r.status IN ('pending', 'retrying')
           AND r.tenant_id > t.tenant_id
         ORDER BY r.tenant_id, r.fire_after
         LIMIT 1) nxt
)
SELECT tenant_id, fire_after FROM unpublished_tenants;
