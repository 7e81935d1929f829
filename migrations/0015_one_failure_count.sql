-- One count of consecutive failed runs per schedule (issues 25 and 26, ADR 0036): the
-- terminal write keeps schedule.consecutive_failures (migration 0010) and both the pause
-- after pause_after_failures and the failing/recovered alerts read it, so 0011's
-- alert_failures, which counted the same runs, goes. Dropping a column rewrites nothing.
ALTER TABLE schedule DROP COLUMN alert_failures;
