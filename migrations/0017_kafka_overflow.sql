-- Kafka mode: a replica whose keys arrive faster than its delivery slots take them says so
-- here (ADR 0050). All of one tenant's keys go to one partition, so one replica's slots
-- bound that tenant's rate; while a row's `until` is ahead, the other replicas sweep runs
-- a second overdue instead of after the sweeper's full grace. One row per replica
-- instance, rewritten at most once a second while it overflows; rows an hour stale are
-- removed by the next report.
CREATE TABLE kafka_overflow (
    owner text PRIMARY KEY,
    until timestamptz NOT NULL
);
