-- Kafka mode's overflow signal (ADR 0063, migration 0017): one row per replica whose keys
-- arrive faster than its delivery slots take them. Written at most once a second by that
-- replica, read once a second by the others' sweeps.

-- name: kafka_overflow_report
-- $1 owner, $2 seconds: the owner overflows until now() + $2. Rows of instances gone an
-- hour are removed on the way (instance ids are per process).
WITH stale AS (
    DELETE FROM kafka_overflow WHERE until < now() - interval '1 hour' AND owner <> $1
)
INSERT INTO kafka_overflow (owner, until)
VALUES ($1, now() + make_interval(secs => $2))
ON CONFLICT (owner) DO UPDATE SET until = excluded.until

-- name: kafka_overflow_peer
-- $1 owner: whether another replica's overflow has not run out.
SELECT EXISTS (SELECT 1 FROM kafka_overflow WHERE until > now() AND owner <> $1)
