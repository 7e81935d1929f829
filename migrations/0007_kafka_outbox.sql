-- Kafka mode outbox (issue 9): the publisher asks "which unpublished runnable runs are due
-- now, oldest first". The created_at index of 0001 cannot answer that without walking every
-- run planned ahead (the planner looks 5 s ahead: a whole burst), so it is replaced by the
-- same partial index ordered by fire_after. No query ever used the old one.
DROP INDEX IF EXISTS job_run_unpublished_idx;
CREATE INDEX job_run_unpublished_due_idx ON job_run (fire_after)
    WHERE published_at IS NULL AND status IN ('pending', 'retrying');
