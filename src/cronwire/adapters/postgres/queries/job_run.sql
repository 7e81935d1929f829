-- job_run: one row per occurrence or manual trigger, through its whole life. Grouped by
-- the stage that runs each statement:
--   planner   job_run_insert_planned (in the planner's transaction, with schedule.sql's
--             schedule_claim_due and schedule_advance)
--   executor  claim, lease upkeep and every write on a leased run. Lease rule 3: each of
--             these writes predicates on claimed_by = $1 (the owner), status = 'running' and
--             the lease_generation its claim returned, so a replica whose lease was reaped or
--             re-claimed writes nothing, even when the re-claim was made under the same
--             instance id (a twin process, or this process's own later claim). The writes
--             on a batch of leases say it as a CASE on the status, so that only the
--             primary key can find their rows (job_run_renew, job_run_resolve).
--   kafka     the outbox on job_run.published_at: a runnable run's key is published once it
--             is due, and published_at is reset whenever the run becomes runnable again
--             (retry, release, defer: job_run_resolve, job_run_give_back), so no key reaches
--             a consumer before its run can be claimed. Served by
--             job_run_unpublished_tenant_idx (migration 0009).
--   api       the tenant's writes (cancel on delete, manual trigger) and the run history.
--             The history's $1 is always tenant_id. Pages are newest scheduled_for first
--             with a keyset on (scheduled_for, id). Bounds are always concrete values (the
--             adapter passes -infinity/+infinity-like sentinels for "no bound"), never
--             "$n IS NULL OR ...", so the planner can prune monthly partitions: at plan
--             time with a custom plan, at executor start-up with a generic one.
--               $2 since (inclusive)   $3 until (exclusive)
--               $4, $5 the previous page's last (scheduled_for, id); "scheduled_for <= $4"
--               repeats the row comparison in a form partition pruning understands.
--               $6 limit   $7 status
--   gauges    fleet-wide counts for /metrics.

-- name: job_run_insert_planned
-- Every planned run in one statement. ON CONFLICT DO NOTHING covers both the primary key
-- (deterministic id) and UNIQUE (schedule_id, scheduled_for): re-planning an occurrence
-- (cursor moved backwards, operator replan) is harmless. Skipped runs are terminal at once.
-- $8 overlap policies and $9 jitter offsets (ms) are NULL when no run of the batch has
-- one (every schedule on 'allow' without jitter): unnest pads a NULL array with NULLs.
-- So are $10 flow keys when no schedule of the batch has flow control, and $11 skip
-- reasons when no run of the batch is skipped by a calendar (NULL reads as 'misfire').
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, trigger,
                     status, fire_after, finished_at, last_error, skip_reason, overlap_policy,
                     flow_key)
SELECT r.id, r.tenant_id, r.schedule_id, r.scheduled_for, r.idempotency_key, r.trigger,
       r.status,
       CASE WHEN r.jitter_ms IS NULL THEN r.scheduled_for
            ELSE r.scheduled_for + make_interval(secs => r.jitter_ms / 1000.0) END,
       CASE WHEN r.status = 'skipped' THEN now() END,
       CASE WHEN r.status <> 'skipped' THEN NULL
            WHEN r.skip_reason = 'calendar'
            THEN 'its date is in a calendar the schedule excludes'
            ELSE 'missed while no planner ran; dropped by the misfire policy' END,
       CASE WHEN r.status = 'skipped' THEN COALESCE(r.skip_reason, 'misfire') END,
       CASE WHEN r.status = 'skipped' THEN NULL ELSE r.overlap_policy END,
       r.flow_key
FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::integer[], $10::text[], $11::text[])
     AS r(id, tenant_id, schedule_id, scheduled_for, idempotency_key, trigger, status,
          overlap_policy, jitter_ms, flow_key, skip_reason)
ON CONFLICT DO NOTHING

-- name: job_run_claim
-- $1 owner, $2 limit (<= idle workers: lease rule 1), $3 lease seconds, $4 grace seconds:
-- only runs due at least this long are taken (0 for the polling claim; kafka mode's fair
-- claim while a partition is backlogged leaves runs whose key is still on its way).
-- Fair across tenants: every tenant with due runs gets its turn 1 run before any tenant
-- gets turn 2, so one tenant's 50,000-run backlog cannot starve another's single run.
-- job_run_runnable_tenants (a view, migration 0014) is a loose index scan over
-- job_run_claim_tenant_idx: one probe per tenant that has runnable rows, reading its
-- earliest fire_after (due or not yet).
-- Expired leases of 'running' rows (their owner died or stalled) come first, turn 0.
-- $5 now: the clock of every due and lease decision (NULL: the server's now(); a value
-- pins it, for tests). This statement only selects and locks the candidates; what happens
-- to each (flow control, the overlap gate, an expired lease's verdict, the lease) is
-- cronwire_claim_tail's (migrations 0029 and 0032), which every claim calls, so kafka
-- mode's claims (job_run_claim_keys, job_run_sweep) apply the same rules.
WITH due_tenants AS (
    -- Longest-waiting tenants first when more tenants are due than one claim can serve,
    -- each with its flow keys that admit nothing now (read without a lock: the admission
    -- below decides under the rows' locks; one probe of flow_control's primary key per
    -- tenant, empty for a tenant without keys).
    SELECT v.tenant_id,
           ARRAY(SELECT f.key FROM flow_control f
                  WHERE f.tenant_id = v.tenant_id AND f.key <> ''
                    AND (f.held_until > COALESCE($5::timestamptz, now())
                         OR f.in_flight >= f.max_concurrency
                         OR LEAST(f.burst, f.tokens + f.rate_per_second
                                  * EXTRACT(EPOCH FROM COALESCE($5, now()) - f.tokens_at)) < 1)) AS blocked
      FROM (SELECT tenant_id, fire_after FROM job_run_runnable_tenants
             WHERE fire_after <= COALESCE($5, now()) - make_interval(secs => $4)
             ORDER BY fire_after
             LIMIT $2) v
),
fair_share AS (
    -- Lock about 2 x limit candidate rows however many tenants are due.
    SELECT LEAST($2, GREATEST(1, ceil(2.0 * $2 / GREATEST(count(*), 1))))::integer AS per_tenant
      FROM due_tenants
),
expired AS (
    -- Leases whose owner died or stalled: reclaimable by this same statement.
    SELECT r.id, r.scheduled_for, r.schedule_id, r.status, r.attempt_count, r.fire_after,
           r.attempt_started, r.cancel_requested, r.overlap_policy, 0::bigint AS turn,
           r.tenant_id, r.flow_key, r.flow_slots
      FROM job_run r
     WHERE r.status = 'running' AND r.claim_expires_at < COALESCE($5, now())
     ORDER BY r.claim_expires_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
fair AS (
    -- Rows are locked where they are read (SKIP LOCKED inside each tenant's scan), so a
    -- concurrent replica's claim skips them instead of waiting, and no second pass over
    -- job_run is needed to lock them. The WHERE is re-checked on the locked row version:
    -- a row another replica claimed or finished meanwhile is not taken. Locked rows that
    -- lose the ranking below are unlocked when this statement's transaction ends.
    SELECT c.id, c.scheduled_for, c.schedule_id, c.status, c.attempt_count, c.fire_after,
           c.attempt_started, c.cancel_requested, c.overlap_policy,
           row_number() OVER (PARTITION BY c.tenant_id ORDER BY c.fire_after) AS turn,
           c.tenant_id, c.flow_key, c.flow_slots
      FROM due_tenants d
     CROSS JOIN fair_share f
     CROSS JOIN LATERAL (
        SELECT r.id, r.scheduled_for, r.schedule_id, r.tenant_id, r.status, r.attempt_count,
               r.fire_after, r.attempt_started, r.cancel_requested, r.overlap_policy,
               r.flow_key, r.flow_slots
          FROM job_run r
         WHERE r.tenant_id = d.tenant_id
           AND r.status IN ('pending', 'retrying')
           AND r.fire_after <= COALESCE($5, now()) - make_interval(secs => $4)
           AND (r.claim_expires_at IS NULL OR r.claim_expires_at < COALESCE($5, now()))
           -- Runs of a key that admits nothing now are passed over here, so a held
           -- key's backlog cannot fill the tenant's share (flow control, ADR 0040).
           -- Not a gated run that does not hold its schedule's gate: the gate decides
           -- it (skipped, resting, or holding the gate, and then passed over here).
           AND (r.flow_key IS NULL OR r.flow_key <> ALL (d.blocked)
                OR (r.overlap_policy IS NOT NULL AND NOT EXISTS (
                        SELECT 1 FROM schedule s
                         WHERE s.id = r.schedule_id AND s.overlap_run = r.id)))
         ORDER BY r.fire_after
         LIMIT f.per_tenant
           FOR UPDATE SKIP LOCKED) c
),
candidates AS (
    SELECT * FROM expired
    UNION ALL
    SELECT * FROM fair
)
-- The lease-taking tail every claim shares, written once: cronwire_claim_tail (migrations
-- 0029 and 0032) admits, gates, decides and leases these candidates, and returns the
-- claimed rows.
SELECT t.*
  FROM (SELECT array_agg(c::cronwire_claim_candidate) AS rows FROM candidates c) a
 CROSS JOIN LATERAL cronwire_claim_tail($1, $2, $3, a.rows, $5) t
 WHERE a.rows IS NOT NULL  -- no candidate: the function is not called

-- name: job_run_renew
-- $1 owner, $2 run ids, $3 their scheduled_for, $4 their lease generations, $5 whether
-- each lease's request has started, $6 lease seconds. Returns the ids still ours.
-- The renewal is also where a started request is recorded (attempt_started), batched
-- with the lease upkeep instead of a write per run before each send. A lease expired but
-- not re-claimed (a database outage longer than the lease) is still ours and renewed.
UPDATE job_run j
   SET claim_expires_at = now() + make_interval(secs => $6),
       attempt_started  = j.attempt_started OR l.started,
       updated_at       = now()
  FROM unnest($2::uuid[], $3::timestamptz[], $4::bigint[], $5::boolean[])
       AS l(id, scheduled_for, generation, started)
 WHERE j.id = l.id AND j.scheduled_for = l.scheduled_for
   -- The lease test as a CASE, as in job_run_resolve: written as plain conditions,
   -- "status = 'running'" let Postgres read the whole lease index, every lease in flight
   -- on every replica, to renew one replica's batch (tests/integration/test_claim_plan.py).
   AND CASE WHEN j.status = 'running'
            THEN j.claimed_by = $1 AND j.lease_generation = l.generation
            ELSE false END
RETURNING j.id

-- name: job_run_superseded
-- $1 owner, $2 run ids, $3 their scheduled_for, $4 their lease generations (leases of
-- cancel_other runs whose requests are in flight). Returns the ids a newer occurrence of
-- their schedule has superseded: the holder aborts those requests (overlap_policy
-- cancel_other: at most one request of the schedule in flight once the new one starts).
SELECT j.id
  FROM unnest($2::uuid[], $3::timestamptz[], $4::bigint[]) AS l(id, scheduled_for, generation)
  JOIN job_run j ON j.id = l.id AND j.scheduled_for = l.scheduled_for
  JOIN schedule s ON s.id = j.schedule_id
 WHERE CASE WHEN j.status = 'running'  -- a CASE, as in job_run_renew
            THEN j.claimed_by = $1 AND j.lease_generation = l.generation
            ELSE false END
   AND j.overlap_policy = 'cancel_other' AND s.overlap_run IS DISTINCT FROM j.id

-- name: job_run_resolve
-- $1 owner; then one array element per run: the state write and its evidence row.
-- The lease_generation (and attempt_count) predicate pins the write to the very lease it
-- ends: a late result of an earlier lease of the same run never lands on a later claim
-- of it, whoever made that claim. A retry of a run whose schedule was deleted while it
-- ran (cancel_requested) ends it 'cancelled' instead: no attempt starts after a delete.
-- So does a retry of a run a newer occurrence superseded while its request was in flight
-- (overlap_policy cancel_other). A superseded run's complete answer (succeeded, failed)
-- is recorded as it came; the executor aborts a superseded request it still has in
-- flight and writes it 'cancelled' itself (job_run_superseded, LeaseKeeper).
-- The same statement wakes the next run waiting on an overlap gate whose holder ended,
-- and keeps each schedule's one count of consecutive failures (consecutive_failures,
-- ADR 0034), from which it decides both the pause after pause_after_failures and the
-- alert transitions (ADR 0036). Only schedules the batch can change are read
-- and locked (in id order, so two batches sharing schedules queue instead of
-- deadlocking): those with a failure here, a count above zero, or an alert rule. A batch
-- of successes under 'allow' with no rule locks no schedule. One UPDATE of the schedule
-- row carries the count, the pause and the alert state: two CTEs updating one row in a
-- statement would keep only one of the writes.
-- The attempt's evidence: a run ended 'succeeded' or 'failed' keeps its final attempt in
-- its own row (last_outcome and the columns beside it, migration 0030); any other started
-- attempt is a row of job_run_attempt. The view run_attempt reads both as one.
-- Returns each landed id with the status written, then one row per schedule this batch
-- paused (id NULL, paused_schedule and its tenant set).
WITH outcome AS (
    SELECT *
      FROM unnest($2::uuid[], $3::timestamptz[], $4::text[], $5::integer[], $6::float8[],
                  $7::integer[], $8::text[], $9::uuid[], $10::timestamptz[], $11::timestamptz[],
                  $12::text[], $13::integer[], $14::text[], $15::bigint[], $16::float8[])
        AS o(id, scheduled_for, status, attempt_count, retry_delay, status_code, error,
             tenant_id, started_at, finished_at, outcome, duration_ms, response_excerpt,
             generation, hold_seconds)
),
landed AS (
    -- "superseded" below: a cancel_other run that no longer holds its schedule's gate. It
    -- is read only for such a run: CASE evaluates lazily, and the policy's test is never
    -- NULL (NULL AND EXISTS (...) would still run the EXISTS, for every run under 'allow':
    -- tests/integration/test_allow_pays_nothing.py).
    UPDATE job_run j
       SET status           = CASE WHEN o.status <> 'retrying' THEN o.status
                                   WHEN j.cancel_requested THEN 'cancelled'
                                   WHEN j.overlap_policy IS NOT DISTINCT FROM 'cancel_other' AND EXISTS (
                                        SELECT 1 FROM schedule s WHERE s.id = j.schedule_id
                                           AND s.overlap_run IS DISTINCT FROM j.id)
                                   THEN 'cancelled' ELSE o.status END,
           fire_after       = CASE WHEN o.status = 'retrying' AND NOT j.cancel_requested
                                   -- clamped as the domain does (retry.py): no
                                   -- value can take the interval out of range
                                   THEN now() + make_interval(
                                            secs => LEAST(GREATEST(o.retry_delay, 0), 86400))
                                   ELSE j.fire_after END,
           finished_at      = CASE WHEN o.status <> 'retrying' OR j.cancel_requested
                                   THEN now()
                                   WHEN j.overlap_policy IS NOT DISTINCT FROM 'cancel_other' AND EXISTS (
                                        SELECT 1 FROM schedule s WHERE s.id = j.schedule_id
                                           AND s.overlap_run IS DISTINCT FROM j.id)
                                   THEN now() END,
           claim_expires_at = NULL,
           last_status_code = o.status_code,
           last_error       = CASE WHEN o.status <> 'retrying' THEN o.error
                                   WHEN j.overlap_policy IS NOT DISTINCT FROM 'cancel_other' AND EXISTS (
                                        SELECT 1 FROM schedule s WHERE s.id = j.schedule_id
                                           AND s.overlap_run IS DISTINCT FROM j.id)
                                   THEN 'Cancelled: superseded by a newer occurrence '
                                        || '(overlap_policy cancel_other); its failed attempt '
                                        || 'is recorded and not retried'
                                   ELSE o.error END,
           published_at     = NULL,  -- kafka mode: a retry is published again when due
           last_duration_ms = COALESCE(o.duration_ms, j.last_duration_ms),
           -- The final attempt of a run that ends with it, kept in this row version
           -- instead of a row of job_run_attempt (migration 0030, ADR 0066): written
           -- exactly when evidence below writes no row for a started attempt.
           last_outcome          = CASE WHEN o.status IN ('succeeded', 'failed')
                                        AND o.started_at IS NOT NULL THEN o.outcome END,
           last_attempt_started  = CASE WHEN o.status IN ('succeeded', 'failed')
                                        THEN o.started_at END,
           last_attempt_finished = CASE WHEN o.status IN ('succeeded', 'failed')
                                             AND o.started_at IS NOT NULL
                                        THEN o.finished_at END,
           last_response_excerpt = CASE WHEN o.status IN ('succeeded', 'failed')
                                        THEN o.response_excerpt END,
           updated_at       = now()
      FROM outcome o
     -- The lease test is a CASE, so that the rows are reached through the primary key:
     -- written as plain conditions, "status = 'running'" let Postgres read the whole
     -- lease index instead whenever the statistics predate the leases (a burst's: 21,424
     -- entries read to write 154 rows in a logged plan; docs/benchmarks.md#levers,
     -- tests/integration/test_claim_plan.py).
     WHERE j.id = o.id AND j.scheduled_for = o.scheduled_for
       AND CASE WHEN j.status = 'running'
                THEN j.claimed_by = $1 AND j.attempt_count = o.attempt_count
                     AND j.lease_generation = o.generation
                ELSE false END
    RETURNING j.id, j.scheduled_for, j.status, j.schedule_id, j.tenant_id, j.overlap_policy,
              j.last_duration_ms, j.last_status_code, j.last_error, j.flow_key, j.flow_slots,
              o.hold_seconds
),
flow_released AS (
    -- Flow control (ADR 0040): the slots the ended leases held, given back, and a key
    -- whose receiver answered 429/503 with Retry-After ($16, NULL when no result of the
    -- batch carries one) held until then on every replica (the latest hold wins). A batch
    -- without flow control reads only its own landed rows here.
    UPDATE flow_control f
       SET in_flight  = GREATEST(f.in_flight - u.n, 0),
           held_until = CASE WHEN u.hold IS NULL THEN f.held_until
                             -- at most an hour, as retry.hold_cap says: a held
                             -- key is always released within the hour
                             ELSE GREATEST(COALESCE(f.held_until, now()),
                                           now() + make_interval(
                                               secs => LEAST(GREATEST(u.hold, 0), 3600))) END,
           updated_at = now()
      FROM (SELECT x.tenant_id, x.key, sum(x.n)::integer AS n, max(x.hold) AS hold
              FROM (SELECT l.tenant_id, CASE WHEN b.bit = 1 THEN l.flow_key ELSE '' END AS key,
                           CASE WHEN l.flow_slots & b.bit <> 0 THEN 1 ELSE 0 END AS n,
                           CASE WHEN b.bit = 1 THEN l.hold_seconds END AS hold
                      FROM landed l
                     CROSS JOIN (VALUES (1), (2)) AS b(bit)
                     WHERE l.flow_slots & b.bit <> 0
                        OR (b.bit = 1 AND l.flow_key IS NOT NULL AND l.hold_seconds IS NOT NULL)) x
             GROUP BY x.tenant_id, x.key) u
     WHERE f.tenant_id = u.tenant_id AND f.key = u.key
),
evidence AS (
    INSERT INTO job_run_attempt (run_id, scheduled_for, tenant_id, attempt, started_at,
                                 finished_at, outcome, status_code, error, duration_ms,
                                 response_excerpt, claimed_by)
    SELECT o.id, o.scheduled_for, o.tenant_id, o.attempt_count, o.started_at, o.finished_at,
           o.outcome, o.status_code, o.error, o.duration_ms, o.response_excerpt, $1
      FROM outcome o
      JOIN landed l ON l.id = o.id AND l.scheduled_for = o.scheduled_for
     -- An attempt followed by a retry, or whose run a retry's cancel ended: the run's
     -- row holds the final attempt of a run that ended 'succeeded' or 'failed' (above).
     WHERE o.started_at IS NOT NULL AND o.status NOT IN ('succeeded', 'failed')
    ON CONFLICT DO NOTHING
),
woken AS (
    -- A gated run ended: the earliest run of its schedule waiting on the gate is due now
    -- (the claim decides whether it starts).
    UPDATE job_run w
       SET fire_after = now(), published_at = NULL, updated_at = now()
      FROM (SELECT DISTINCT l.schedule_id FROM landed l
             WHERE l.overlap_policy IS NOT NULL
               AND l.status IN ('succeeded', 'failed', 'cancelled')) e
     CROSS JOIN LATERAL (
        SELECT n.id, n.scheduled_for FROM job_run n
         WHERE n.schedule_id = e.schedule_id AND n.overlap_policy IS NOT NULL
           AND n.status IN ('pending', 'retrying') AND n.scheduled_for <= now()
         ORDER BY n.scheduled_for
         LIMIT 1) nxt
     WHERE w.id = nxt.id AND w.scheduled_for = nxt.scheduled_for AND w.fire_after > now()
),
ended AS (
    SELECT * FROM landed WHERE status IN ('succeeded', 'failed')
),
candidates AS (
    -- The schedules whose count, pause or alert state this batch can change: those with a
    -- failure here, and those with a success whose count is above zero or that have a rule,
    -- each found through its nearly empty partial index (schedule_failing_idx,
    -- schedule_alert_rules_idx), so a schedule that is none of these costs two probes
    -- that match nothing, not a read of its row.
    SELECT schedule_id AS id FROM ended WHERE status = 'failed'
    UNION
    SELECT s.id FROM schedule s
     WHERE s.id = ANY (ARRAY(SELECT DISTINCT schedule_id FROM ended))
       AND s.consecutive_failures > 0
    UNION
    SELECT s.id FROM schedule s
     WHERE s.id = ANY (ARRAY(SELECT DISTINCT schedule_id FROM ended))
       AND (s.alert_after_failures IS NOT NULL OR s.alert_max_duration_ms IS NOT NULL)
),
watched AS (
    -- Locked in id order. Deleted schedules neither count nor alert.
    SELECT s.id, s.tenant_id, s.name, s.status, s.consecutive_failures,
           s.pause_after_failures, s.alert_after_failures, s.alert_max_duration_ms,
           s.alert_failing, s.alert_slow, s.alert_told_failing, s.alert_flap_window_start,
           s.alert_suppressed_flips
      FROM schedule s
     WHERE s.id = ANY (ARRAY(SELECT id FROM candidates)) AND s.status <> 'deleted'
     ORDER BY s.id
       FOR UPDATE
),
batch AS (
    -- Per schedule, in occurrence order: its latest success in this batch and the
    -- failures after it (consecutive failures continue the stored count only when the
    -- batch has no success).
    SELECT e.schedule_id,
           max(e.scheduled_for) FILTER (WHERE e.status = 'succeeded') AS success_at,
           (array_agg(e.id ORDER BY e.scheduled_for DESC)
               FILTER (WHERE e.status = 'succeeded'))[1] AS success_run,
           (array_agg(e.last_duration_ms ORDER BY e.scheduled_for DESC)
               FILTER (WHERE e.status = 'succeeded'))[1] AS success_ms,
           (array_agg(e.id ORDER BY e.last_duration_ms DESC NULLS LAST)
               FILTER (WHERE e.status = 'succeeded'))[1] AS slowest_run,
           max(e.last_duration_ms) FILTER (WHERE e.status = 'succeeded') AS slowest_ms,
           (array_agg(e.id ORDER BY e.scheduled_for DESC)
               FILTER (WHERE e.status = 'failed'))[1] AS failed_run,
           (array_agg(e.last_status_code ORDER BY e.scheduled_for DESC)
               FILTER (WHERE e.status = 'failed'))[1] AS failed_code,
           (array_agg(e.last_error ORDER BY e.scheduled_for DESC)
               FILTER (WHERE e.status = 'failed'))[1] AS failed_error
      FROM ended e
     WHERE e.schedule_id IN (SELECT id FROM watched)
     GROUP BY e.schedule_id
),
counted AS (
    SELECT w.*, b.*, f.failures,
           -- still failing until a success, even when a resume reset the count
           w.alert_after_failures IS NOT NULL
               AND (f.failures >= w.alert_after_failures
                    OR (w.alert_failing AND b.success_at IS NULL)) AS failing_now,
           CASE WHEN w.alert_max_duration_ms IS NULL OR b.success_at IS NULL THEN w.alert_slow
                ELSE b.success_ms > w.alert_max_duration_ms END AS slow_now,
           -- pause_after_failures: decided on the row lock taken above, so two replicas'
           -- batches add up and exactly one of them pauses the schedule.
           w.status = 'active' AND w.pause_after_failures IS NOT NULL
               AND f.failures >= w.pause_after_failures AS tripped
      FROM watched w
      JOIN batch b ON b.schedule_id = w.id
     CROSS JOIN LATERAL (
        SELECT CASE WHEN b.success_at IS NULL THEN w.consecutive_failures ELSE 0 END
               + (SELECT count(*) FROM ended e
                   WHERE e.schedule_id = w.id AND e.status = 'failed'
                     AND e.scheduled_for > COALESCE(b.success_at, '-infinity'))::integer
               AS failures) f
),
flips AS (
    -- The failing/recovered transitions of this batch, before damping (recovered: a
    -- success while failing; failing: the count reached the rule, from not failing or
    -- after a recovery in this same batch).
    SELECT n.*,
           n.alert_failing AND n.success_at IS NOT NULL AS recovered_fires,
           n.failing_now AND (NOT n.alert_failing OR n.success_at IS NOT NULL) AS failing_fires,
           n.alert_flap_window_start > now() - interval '60 seconds' AS window_open
      FROM counted n
),
decided AS (
    -- Flap damping (migration 0020): at most one failing/recovered pair per 60 s. A
    -- failing is sent when no window is open and opens one; a recovered is sent when the
    -- tenant was told failing (it closes the pair). Every other flip is counted, and the
    -- first event sent afterwards carries the count.
    SELECT f.*,
           f.recovered_fires AND f.alert_told_failing AS recovered_sent,
           f.failing_fires AND f.window_open IS NOT TRUE AS failing_sent,
           (f.recovered_fires AND NOT f.alert_told_failing)::integer AS recovered_damped,
           (f.failing_fires AND f.window_open IS TRUE)::integer AS failing_damped
      FROM flips f
),
damped AS (
    SELECT d.*,
           CASE WHEN d.recovered_sent THEN d.alert_suppressed_flips ELSE 0 END
               AS recovered_carries,
           CASE WHEN d.failing_sent AND NOT d.recovered_sent
                THEN d.alert_suppressed_flips + d.recovered_damped ELSE 0 END
               AS failing_carries,
           CASE WHEN d.failing_sent THEN 0
                WHEN d.recovered_sent THEN d.failing_damped
                ELSE d.alert_suppressed_flips + d.recovered_damped + d.failing_damped END
               AS suppressed_after,
           CASE WHEN d.failing_sent THEN true
                WHEN d.recovered_fires THEN false
                ELSE d.alert_told_failing END AS told_failing_after,
           CASE WHEN d.failing_sent THEN now() ELSE d.alert_flap_window_start END
               AS window_after
      FROM decided d
),
schedule_state AS (
    UPDATE schedule s
       SET consecutive_failures = n.failures,
           alert_failing = n.failing_now,
           alert_slow = n.slow_now,
           alert_told_failing = n.told_failing_after,
           alert_flap_window_start = n.window_after,
           alert_suppressed_flips = n.suppressed_after,
           status = CASE WHEN n.tripped THEN 'paused' ELSE s.status END,
           paused_at = CASE WHEN n.tripped THEN now() ELSE s.paused_at END,
           paused_reason = CASE WHEN n.tripped
                                THEN format('Paused automatically after %s consecutive failed '
                                            'runs (pause_after_failures: %s). The last one '
                                            'failed with: %s. Fix the target, then resume '
                                            'the schedule.',
                                            n.failures, n.pause_after_failures,
                                            COALESCE(left(n.failed_error, 300),
                                                     'no error recorded'))
                                ELSE s.paused_reason END
      FROM damped n
     WHERE s.id = n.id
       AND (n.tripped OR (s.consecutive_failures, s.alert_failing, s.alert_slow,
                          s.alert_told_failing, s.alert_flap_window_start,
                          s.alert_suppressed_flips)
                         IS DISTINCT FROM (n.failures, n.failing_now, n.slow_now,
                                           n.told_failing_after, n.window_after,
                                           n.suppressed_after))
    RETURNING s.id, s.tenant_id, n.tripped
),
alert_events AS (
    -- Once per transition: recovered and failing as damping decided (damped), slow (a
    -- success over the rule while not already slow), paused (pause_after_failures paused
    -- the schedule here; with or without an alert rule).
    INSERT INTO alert_event (id, tenant_id, schedule_id, schedule_name, type, run_id, detail,
                             status)
    SELECT gen_random_uuid(), n.tenant_id, n.id, n.name, e.type, e.run_id, e.detail,
           CASE WHEN e.type = ANY (d.events) THEN 'pending' ELSE 'undelivered' END
      FROM damped n
     CROSS JOIN LATERAL (VALUES
        (1, 'schedule.recovered', n.recovered_sent, n.success_run,
         jsonb_build_object('after_failures', n.alert_after_failures)
         || CASE WHEN n.recovered_carries > 0
                 THEN jsonb_build_object('suppressed_flips', n.recovered_carries) ELSE '{}' END),
        (2, 'schedule.failing', n.failing_sent, n.failed_run,
         jsonb_build_object('consecutive_failures', n.failures,
                            'after_failures', n.alert_after_failures,
                            'last_status_code', n.failed_code, 'last_error', n.failed_error)
         || CASE WHEN n.failing_carries > 0
                 THEN jsonb_build_object('suppressed_flips', n.failing_carries) ELSE '{}' END),
        (3, 'schedule.slow',
         n.alert_max_duration_ms IS NOT NULL AND NOT n.alert_slow
             AND n.slowest_ms > n.alert_max_duration_ms, n.slowest_run,
         jsonb_build_object('duration_ms', n.slowest_ms,
                            'max_duration_ms', n.alert_max_duration_ms)),
        (4, 'schedule.paused', n.tripped, n.failed_run,
         jsonb_build_object('consecutive_failures', n.failures,
                            'pause_after_failures', n.pause_after_failures,
                            'last_status_code', n.failed_code, 'last_error', n.failed_error))
     ) AS e(ord, type, fires, run_id, detail)
      LEFT JOIN tenant_alert_destination d ON d.tenant_id = n.tenant_id
     WHERE e.fires
     ORDER BY n.id, e.ord
)
SELECT id, status, NULL::uuid AS paused_schedule, NULL::uuid AS paused_tenant FROM landed
UNION ALL
SELECT NULL, NULL, id, tenant_id FROM schedule_state WHERE tripped

-- name: job_run_ended_by_lease
-- After a resolve whose reply was lost (the connection died around the commit): which of
-- these leases' writes did land. $1 owner, $2 ids, $3 scheduled_for, $4 generations.
-- A run no longer running, still claimed_by us under the same generation, was ended by
-- our own write (a later claim would have changed the generation). Read only on the
-- retry path, never per batch.
SELECT j.id, j.status
  FROM job_run j
  JOIN unnest($2::uuid[], $3::timestamptz[], $4::bigint[]) AS l(id, scheduled_for, generation)
    ON j.id = l.id AND j.scheduled_for = l.scheduled_for
 WHERE j.claimed_by = $1 AND j.lease_generation = l.generation AND j.status <> 'running'

-- name: job_run_fail_minimal
-- The last resort after a failed resolve: the smallest write that ends the run, so the
-- reap -> claim -> redeliver cycle cannot go on for ever. $1 owner, $2 id, $3 scheduled_for,
-- $4 error, $5 lease generation.
WITH failed AS (
    UPDATE job_run
       SET status = 'failed', finished_at = now(), claim_expires_at = NULL, last_error = $4,
           updated_at = now()
     WHERE id = $2 AND scheduled_for = $3 AND claimed_by = $1 AND status = 'running'
       AND lease_generation = $5
    RETURNING tenant_id, flow_key, flow_slots
),
released AS (
    -- Its flow slots back (ADR 0040).
    UPDATE flow_control f
       SET in_flight = GREATEST(f.in_flight - 1, 0), updated_at = now()
      FROM failed x
     WHERE f.tenant_id = x.tenant_id
       AND ((f.key = x.flow_key AND x.flow_slots & 1 <> 0)
            OR (f.key = '' AND x.flow_slots & 2 <> 0))
)
SELECT count(*) FROM failed

-- name: job_run_give_back
-- Release (shutdown, $4 NULL: due again at once) or defer (open breaker, $4 = when):
-- the attempt the claim took is given back, and the run returns to the state it was
-- claimed from. Only rows still ours: a draining replica cannot decrement the attempt
-- count of a run another replica has re-claimed (nor one its twin under the same
-- instance id holds: the generation). A run whose schedule was deleted meanwhile is not
-- given back but cancelled, and so is one a newer occurrence superseded meanwhile
-- (overlap_policy cancel_other). $1 owner, $2 ids, $3 scheduled_for, $4 generations,
-- $5 until.
WITH ending AS (
    -- cancel_requested is read by the update itself (on the row as a concurrent delete
    -- left it); whether a newer run took the gate may be read a moment early: a run given
    -- back meanwhile is cancelled by the claim that next finds it.
    SELECT j.id, j.scheduled_for, l.generation,
           j.overlap_policy IS NOT DISTINCT FROM 'cancel_other' AND EXISTS (
               SELECT 1 FROM schedule s WHERE s.id = j.schedule_id
                  AND s.overlap_run IS DISTINCT FROM j.id) AS superseded
      FROM job_run j
      JOIN unnest($2::uuid[], $3::timestamptz[], $4::bigint[]) AS l(id, scheduled_for, generation)
        ON j.id = l.id AND j.scheduled_for = l.scheduled_for
     WHERE CASE WHEN j.status = 'running'  -- a CASE, as in job_run_renew
                THEN j.claimed_by = $1 AND j.lease_generation = l.generation
                ELSE false END
),
given AS (
UPDATE job_run j
   SET status           = CASE WHEN j.cancel_requested OR e.superseded THEN 'cancelled'
                               WHEN j.attempt_count <= 1 THEN 'pending' ELSE 'retrying' END,
       attempt_count    = CASE WHEN j.cancel_requested OR e.superseded THEN j.attempt_count
                               ELSE GREATEST(j.attempt_count - 1, 0) END,
       first_attempt_at = CASE WHEN j.attempt_count <= 1
                                    AND NOT (j.cancel_requested OR e.superseded) THEN NULL
                               ELSE j.first_attempt_at END,
       fire_after       = COALESCE($5::timestamptz, j.fire_after),
       finished_at      = CASE WHEN j.cancel_requested OR e.superseded THEN now() END,
       claim_expires_at = NULL,
       published_at     = NULL,  -- kafka mode: runnable again, so published again when due
       updated_at       = now()
  FROM ending e
 WHERE j.id = e.id AND j.scheduled_for = e.scheduled_for
   AND CASE WHEN j.status = 'running'
            THEN j.claimed_by = $1 AND j.lease_generation = e.generation
            ELSE false END
RETURNING j.tenant_id, j.flow_key, j.flow_slots
),
flow_released AS (
    -- The leases' flow slots back (ADR 0040): a run given back takes a slot again only
    -- when a claim admits it again.
    UPDATE flow_control f
       SET in_flight = GREATEST(f.in_flight - u.n, 0), updated_at = now()
      FROM (SELECT g.tenant_id, CASE WHEN b.bit = 1 THEN g.flow_key ELSE '' END AS key,
                   count(*)::integer AS n
              FROM given g
             CROSS JOIN (VALUES (1), (2)) AS b(bit)
             WHERE g.flow_slots & b.bit <> 0
             GROUP BY 1, 2) u
     WHERE f.tenant_id = u.tenant_id AND f.key = u.key
)
SELECT count(*) FROM given

-- name: job_run_next_due
-- Seconds (database clock) until the earliest runnable run is due: negative when one is
-- overdue, NULL when none is runnable (earliest); and until the earliest one not due yet
-- (fresh; NULL: none). The planner writes runs ahead of their time, so an idle executor
-- can sleep until exactly then instead of polling. Overdue runs an empty claim left behind
-- are not the caller's to take now (a flow-control key holds them back, or another
-- replica's claim holds their rows): the caller backs off from them but still wakes for
-- the next run that falls due (PostgresClaimSource). Two probes per partition of
-- job_run_claim_idx.
SELECT EXTRACT(EPOCH FROM (min(fire_after) - now()))::float8 AS earliest,
       EXTRACT(EPOCH FROM ((SELECT min(f.fire_after) FROM job_run f
                             WHERE f.status IN ('pending', 'retrying')
                               AND f.fire_after > now()) - now()))::float8 AS fresh
FROM job_run
WHERE status IN ('pending', 'retrying')

-- name: job_run_claim_keys
-- Kafka mode: claim the runs whose keys a broker delivered. Only the candidates differ
-- from job_run_claim: they go to the same cronwire_claim_tail, so the overlap gate and the
-- expired-lease and attempt-exhaustion rules are the same. $1 owner, $2 limit, $3 lease
-- seconds, $4 run ids, $5 their scheduled_for, $6 now (NULL: the server's now()).
-- A key is a hint: only rows that are runnable now (or hold an expired lease) are taken.
-- Each distinct key is one probe of its partition's primary key, in id order (the order
-- the rows are locked in, so two claims sharing keys queue instead of deadlocking): a
-- key names a run only with its own instant. The probe is a LATERAL subquery that locks
-- its row, which Postgres cannot flatten into a join: as a join (or with "id = ANY" over
-- the key array), a partition without statistics yet, as a burst's is while its runs are
-- new, was read whole by a sequential scan, every row of it for each claim
-- (tests/integration/test_claim_plan.py). A semi-join with the key list compared every
-- row with half the list on average.
-- In a burst the statistics predate the burst (its runs were planned since), so runnable
-- and leased runs look rare, and Postgres ANDed the primary key's bitmap with the whole
-- claim and lease indexes (every unclaimed and every leased run of the burst, 4-8 ms a
-- claim): the runnable test below is written so that no index can serve it
-- (tests/integration/test_claim_plan.py, docs/benchmarks.md#levers).
-- FOR UPDATE waits instead of skipping: a row locked for a moment by the outbox publisher
-- (marking it again after a run turned runnable again) or by a SKIP LOCKED claim that will
-- not keep it must not make this claim drop the key (nothing would deliver it again until
-- the sweeper's grace).
WITH candidates AS (
    SELECT r.*
      FROM (SELECT DISTINCT k.id, k.scheduled_for
              FROM unnest($4::uuid[], $5::timestamptz[]) AS k(id, scheduled_for)
             ORDER BY k.id) k
     CROSS JOIN LATERAL (
        SELECT r.id, r.scheduled_for, r.schedule_id, r.status, r.attempt_count, r.fire_after,
               r.attempt_started, r.cancel_requested, r.overlap_policy,
               CASE WHEN r.status = 'running' THEN 0 ELSE 1 END::bigint AS turn,
               r.tenant_id, r.flow_key, r.flow_slots
          FROM job_run r
         WHERE r.id = k.id AND r.scheduled_for = k.scheduled_for
           -- Runnable now, as a CASE: a test no index can serve and no partial index's
           -- predicate follows from, so only the primary key finds the rows (see above).
           AND CASE WHEN r.status IN ('pending', 'retrying')
                    THEN r.fire_after <= COALESCE($6::timestamptz, now())
                         AND (r.claim_expires_at IS NULL OR r.claim_expires_at < COALESCE($6, now()))
                    WHEN r.status = 'running' THEN r.claim_expires_at < COALESCE($6, now())
                    ELSE false END
           FOR UPDATE OF r) r
)
-- The lease-taking tail every claim shares, written once: cronwire_claim_tail (migrations
-- 0029 and 0032) admits, gates, decides and leases these candidates, and returns the
-- claimed rows.
SELECT t.*
  FROM (SELECT array_agg(c::cronwire_claim_candidate) AS rows FROM candidates c) a
 CROSS JOIN LATERAL cronwire_claim_tail($1, $2, $3, a.rows, $6) t
 WHERE a.rows IS NOT NULL  -- no candidate: the function is not called

-- name: job_run_held_keys
-- Kafka mode, after a claim of keys ($1 ids, $2 scheduled_for: those it neither leased nor
-- ended): how many of their runs are still runnable, due and not leased. A flow-control
-- limit held them back (ADR 0040); their messages are consumed, so the hybrid claim
-- source claims fairly for a while rather than leave them to the sweeper's grace. Read only
-- when a claim of keys left some, one probe of the primary key per distinct key, as in
-- job_run_claim_keys (LIMIT 1 keeps the LATERAL subquery from being flattened into a join,
-- which a partition without statistics answered with a sequential scan).
SELECT count(*)
  FROM (SELECT DISTINCT k.id, k.scheduled_for
          FROM unnest($1::uuid[], $2::timestamptz[]) AS k(id, scheduled_for)) k
 CROSS JOIN LATERAL (
    SELECT 1
      FROM job_run r
     WHERE r.id = k.id AND r.scheduled_for = k.scheduled_for
       -- A CASE as in job_run_claim_keys: only the primary key finds the rows.
       AND CASE WHEN r.status IN ('pending', 'retrying')
                THEN r.fire_after <= now()
                     AND (r.claim_expires_at IS NULL OR r.claim_expires_at < now())
                ELSE false END
     LIMIT 1) r

-- name: job_run_sweep
-- Kafka mode's safety net: runs due longer than the grace ($4 seconds) that no message
-- delivered (broker restart, lost partition, crash between commit and publish), and
-- leases whose owner vanished (no message will ever come for those). Oldest first,
-- SKIP LOCKED like the polling claim, then job_run_claim's tail (cronwire_claim_tail).
-- $1 owner, $2 limit, $3 lease seconds, $5 now (NULL: the server's now()).
WITH expired AS (
    SELECT r.id, r.scheduled_for, r.schedule_id, r.status, r.attempt_count, r.fire_after,
           r.attempt_started, r.cancel_requested, r.overlap_policy,
           0::bigint AS turn, r.tenant_id, r.flow_key, r.flow_slots
      FROM job_run r
     WHERE r.status = 'running' AND r.claim_expires_at < COALESCE($5::timestamptz, now())
     ORDER BY r.claim_expires_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
overdue AS (
    SELECT r.id, r.scheduled_for, r.schedule_id, r.status, r.attempt_count, r.fire_after,
           r.attempt_started, r.cancel_requested, r.overlap_policy,
           1::bigint AS turn, r.tenant_id, r.flow_key, r.flow_slots
      FROM job_run r
     WHERE r.status IN ('pending', 'retrying')
       AND r.fire_after <= COALESCE($5, now()) - make_interval(secs => $4)
       AND (r.claim_expires_at IS NULL OR r.claim_expires_at < COALESCE($5, now()))
       -- A key that admits nothing now is passed over (flow control, ADR 0040), but not
       -- a gated run that does not hold its schedule's gate (job_run_claim says why).
       AND (r.flow_key IS NULL
            OR (r.overlap_policy IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM schedule s WHERE s.id = r.schedule_id AND s.overlap_run = r.id))
            OR NOT EXISTS (
                SELECT 1 FROM flow_control f
                 WHERE f.tenant_id = r.tenant_id AND f.key = r.flow_key
                   AND (f.held_until > COALESCE($5, now()) OR f.in_flight >= f.max_concurrency
                        OR LEAST(f.burst, f.tokens + f.rate_per_second
                                 * EXTRACT(EPOCH FROM COALESCE($5, now()) - f.tokens_at)) < 1)))
     ORDER BY r.fire_after
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
candidates AS (
    SELECT * FROM expired
    UNION ALL
    SELECT * FROM overdue
)
-- The lease-taking tail every claim shares, written once: cronwire_claim_tail (migrations
-- 0029 and 0032) admits, gates, decides and leases these candidates, and returns the
-- claimed rows.
SELECT t.*
  FROM (SELECT array_agg(c::cronwire_claim_candidate) AS rows FROM candidates c) a
 CROSS JOIN LATERAL cronwire_claim_tail($1, $2, $3, a.rows, $5) t
 WHERE a.rows IS NOT NULL  -- no candidate: the function is not called

-- name: job_run_outbox_take
-- $1 limit, $2 max age: only runs due at most $2 seconds ago (while this replica's keys are
-- backlogged, older runs are the fair polling claim's; otherwise a bound no run reaches);
-- $3 the most keys of one tenant a pass takes (the limit, or a small share while
-- backlogged: a burst's keys then follow the claims instead of running ahead of them).
-- Due, unpublished, runnable runs, marked published in this one statement and
-- committed before their keys are sent (PostgresOutboxStore): a consumer never receives a
-- key whose row is still locked by the publisher, so a claim by key never waits on it.
-- SKIP LOCKED so the publishers of several replicas split the work. Fair across tenants like
-- job_run_claim: every due tenant's oldest keys go first, so one tenant's burst cannot
-- hold back another tenant's key by the time it takes to publish the burst. The tenants
-- come from job_run_unpublished_tenants (a view, migration 0014), a loose index scan over
-- job_run_unpublished_tenant_idx: one probe per tenant with unpublished runs. Rows locked beyond the limit (at most about
-- 2 x limit in all) are unlocked when the statement's transaction ends. RETURNING's order
-- is not the fair order, so each key comes back with its turn and fire_after to sort by.
WITH due_tenants AS (
    SELECT tenant_id FROM job_run_unpublished_tenants
     WHERE fire_after <= now()
     ORDER BY fire_after
     LIMIT $1
),
fair_share AS (
    SELECT LEAST($1, $3::integer, GREATEST(1, ceil(2.0 * $1 / GREATEST(count(*), 1))))::integer
           AS per_tenant
      FROM due_tenants
),
fair AS (
    SELECT c.id, c.scheduled_for, c.tenant_id, c.fire_after,
           row_number() OVER (PARTITION BY c.tenant_id ORDER BY c.fire_after) AS turn
      FROM due_tenants d
     CROSS JOIN fair_share f
     CROSS JOIN LATERAL (
        SELECT r.id, r.scheduled_for, r.tenant_id, r.fire_after
          FROM job_run r
         WHERE r.tenant_id = d.tenant_id
           AND r.published_at IS NULL AND r.status IN ('pending', 'retrying')
           AND r.fire_after <= now() AND r.fire_after > now() - make_interval(secs => $2)
         ORDER BY r.fire_after
         LIMIT f.per_tenant
           FOR UPDATE SKIP LOCKED) c
),
chosen AS (
    SELECT id, scheduled_for, turn, fire_after
      FROM fair
     ORDER BY turn, fire_after
     LIMIT $1
)
UPDATE job_run j
   SET published_at = now()
  FROM chosen c
 WHERE j.id = c.id AND j.scheduled_for = c.scheduled_for
RETURNING j.id, j.scheduled_for, j.tenant_id, c.turn, c.fire_after

-- name: job_run_outbox_unmark
-- $1 run ids, $2 their scheduled_for: keys marked by job_run_outbox_take that the broker
-- did not acknowledge, unpublished again for the next pass. Only rows still runnable and
-- still marked: a run claimed meanwhile (by the sweeper) is left as it is.
UPDATE job_run j
   SET published_at = NULL
  FROM unnest($1::uuid[], $2::timestamptz[]) AS k(id, scheduled_for)
 WHERE j.id = k.id AND j.scheduled_for = k.scheduled_for
   AND j.published_at IS NOT NULL AND j.status IN ('pending', 'retrying')

-- name: job_run_outbox_next_due
-- Seconds until the earliest unpublished runnable run is due (negative when overdue,
-- NULL when there is none): the publisher sleeps exactly that long. The same loose index
-- scan as job_run_outbox_take: each tenant's earliest, then the least of those (the index
-- is ordered by tenant first, so a plain min() would read every unpublished run).
SELECT EXTRACT(EPOCH FROM (min(fire_after) - now()))::float8
  FROM job_run_unpublished_tenants

-- name: job_run_cancel_for_schedule
-- Runs not yet started of a deleted schedule are cancelled. A leased (running) run is
-- left to finish its request, which may already be on the wire, but is marked
-- cancel_requested: its result is recorded, and instead of a retry, a release or a
-- re-claim of its lease it ends 'cancelled' (the executor's statements above), so no attempt starts after
-- the delete. One UPDATE for both on purpose: it waits for a claim or a resolve that
-- holds a row, then re-checks the row as that transaction left it, so a run that turned
-- 'running' or 'retrying' meanwhile is caught either way. Counts both kinds of run.
UPDATE job_run
SET status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,
    finished_at = CASE WHEN status = 'running' THEN finished_at ELSE now() END,
    cancel_requested = true,
    updated_at = now()
WHERE tenant_id = $1 AND schedule_id = $2 AND status IN ('pending', 'retrying', 'running')

-- name: job_run_unplan_ahead
-- A pause, or an edit of the timing: the schedule's occurrences the planner already wrote
-- that are not due yet and have not been claimed are taken back (the planner writes
-- infrequent schedules' next occurrence up to a minute ahead), so a paused schedule fires
-- nothing more and an edited one nothing on its old timetable. A run already claimed,
-- retrying or deferred stays. $1 tenant, $2 schedule. Returns the instants taken back.
DELETE FROM job_run
 WHERE tenant_id = $1 AND schedule_id = $2 AND trigger = 'schedule'
   AND status = 'pending' AND scheduled_for > now()
RETURNING scheduled_for

-- name: job_run_last_occurrence_before
-- $1 tenant, $2 schedule, $3 instant: the latest occurrence written before it (NULL:
-- none), the schedule's last_fire_at once what came after it was taken back.
SELECT max(scheduled_for) FROM job_run
 WHERE tenant_id = $1 AND schedule_id = $2 AND trigger = 'schedule' AND scheduled_for < $3

-- name: job_run_manual_instant
-- Cron occurrences are whole seconds; a manual run's instant never is (a whole-second
-- clock reading is nudged by 1 µs), so it cannot take an occurrence's (schedule_id,
-- scheduled_for) slot. clock_timestamp(), not now(): a retry must see a new instant.
SELECT CASE WHEN date_trunc('second', t) = t THEN t + interval '1 microsecond' ELSE t END
FROM clock_timestamp() AS t

-- name: job_run_insert_manual
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, trigger,
                     status, fire_after, flow_key)
VALUES ($1, $2, $3, $4, $5, 'manual', 'pending', $4,
        (SELECT flow_key FROM schedule WHERE id = $3))
ON CONFLICT DO NOTHING
RETURNING id, schedule_id, scheduled_for, status, attempt_count, fire_after,
          first_attempt_at, finished_at, last_status_code, last_error, trigger,
          skip_reason, replay_of, replayed_by

-- name: job_run_list_for_tenant
-- job_run_tenant_status_history_idx (tenant_id, status, scheduled_for DESC, id DESC), read
-- once per status: the newest $6 keys of each (index-only where the visibility map
-- allows), the newest $6 of those, then their rows by primary key. A page reads at most
-- seven times its length of index entries and its length of rows. There is no index on
-- (tenant_id, scheduled_for) of its own: it cost every status change of every run an
-- index entry (migration 0016, docs/benchmarks.md#levers).
WITH page AS (
    SELECT k.scheduled_for, k.id
      FROM unnest('{pending,running,retrying,succeeded,failed,skipped,cancelled}'::text[])
           AS s (status)
     CROSS JOIN LATERAL (
        SELECT r.scheduled_for, r.id
          FROM job_run r
         WHERE r.tenant_id = $1 AND r.status = s.status
           AND r.scheduled_for >= $2 AND r.scheduled_for < $3
           AND r.scheduled_for <= $4 AND (r.scheduled_for, r.id) < ($4, $5)
         ORDER BY r.scheduled_for DESC, r.id DESC
         LIMIT $6) k
     ORDER BY k.scheduled_for DESC, k.id DESC
     LIMIT $6
)
SELECT j.id, j.schedule_id, j.scheduled_for, j.status, j.attempt_count, j.fire_after,
       j.first_attempt_at, j.finished_at, j.last_status_code, j.last_error, j.trigger,
       j.skip_reason, j.replay_of, j.replayed_by
FROM page p
JOIN job_run j ON j.id = p.id AND j.scheduled_for = p.scheduled_for AND j.tenant_id = $1
 -- true of every key of the page; said again so the rows' side prunes months as well
 AND j.scheduled_for >= $2 AND j.scheduled_for < $3 AND j.scheduled_for <= $4
ORDER BY j.scheduled_for DESC, j.id DESC

-- name: job_run_list_for_tenant_status
-- job_run_tenant_status_history_idx (tenant_id, status, scheduled_for DESC, id DESC).
SELECT id, schedule_id, scheduled_for, status, attempt_count, fire_after,
       first_attempt_at, finished_at, last_status_code, last_error, trigger,
       skip_reason, replay_of, replayed_by
FROM job_run
WHERE tenant_id = $1 AND status = $7
  AND scheduled_for >= $2 AND scheduled_for < $3
  AND scheduled_for <= $4 AND (scheduled_for, id) < ($4, $5)
ORDER BY scheduled_for DESC, id DESC
LIMIT $6

-- name: job_run_list_for_schedule
-- The occurrence key (schedule_id, scheduled_for), read backwards. scheduled_for is
-- unique within a schedule, so it alone orders the page exactly as (scheduled_for, id)
-- does, and the keyset is "scheduled_for < $4", an index condition on that key (the id
-- half of the cursor is not needed). The status filter is a plain filter here: one
-- schedule's history is the bounded set it walks.
--   $5 limit   $6 status or NULL   $7 schedule_id
SELECT id, schedule_id, scheduled_for, status, attempt_count, fire_after,
       first_attempt_at, finished_at, last_status_code, last_error, trigger,
       skip_reason, replay_of, replayed_by
FROM job_run
WHERE schedule_id = $7 AND tenant_id = $1
  AND scheduled_for >= $2 AND scheduled_for < $3 AND scheduled_for < $4
  AND ($6::text IS NULL OR status = $6::text)
ORDER BY scheduled_for DESC
LIMIT $5

-- name: job_run_get
-- By id alone: one primary-key probe per partition (the id does not say which month).
SELECT id, schedule_id, scheduled_for, status, attempt_count, fire_after,
       first_attempt_at, finished_at, last_status_code, last_error, trigger,
       skip_reason, replay_of, replayed_by
FROM job_run
WHERE id = $2 AND tenant_id = $1

-- name: job_run_due_backlog
-- Runs due and not terminal: runnable ones past fire_after plus those being delivered.
SELECT (SELECT count(*) FROM job_run
         WHERE status IN ('pending', 'retrying') AND fire_after <= now())
     + (SELECT count(*) FROM job_run WHERE status = 'running') AS backlog

-- name: job_run_stats_values
-- One schedule's finished runs with scheduled_for in [$2, $3), summed per UTC period of $4
-- (a day or an hour, date_bin from a midnight) by one hashed pass over
-- job_run_schedule_stats_idx: the count per status (kind 3), per distinct fire lag in ms
-- (kind 5; NULL: never started) and per distinct duration (kind 6; NULL: none recorded).
-- The index's payload columns make it an index-only scan where the visibility map allows.
-- The reader buckets the values and keeps the closed periods' summaries (ADR 0036).
-- date_part, not EXTRACT: float8 arithmetic, where EXTRACT's numeric took as long as the
-- whole scan of 100,000 runs. $1 schedule.
-- Fire lag is the scheduled runs' lag: a backfill, replay or manual run starts
-- late by design, and a misfire catch-up run (written more than $5, the planner's misfire
-- tolerance, after it was due) measures the outage that missed it; theirs is NULL, as a
-- run that never started, so they are counted but not in the lag.
SELECT period, GROUPING(status, lag_ms, duration_ms) AS kind, status, lag_ms, duration_ms,
       count(*) AS runs
  FROM (SELECT date_bin($4::interval, scheduled_for, TIMESTAMPTZ '2000-01-01 00:00:00+00')
                   AS period,
               status,
               CASE WHEN trigger = 'schedule' AND created_at <= scheduled_for + $5::interval
                    THEN date_part('epoch', first_attempt_at - scheduled_for) * 1000
               END AS lag_ms,
               last_duration_ms AS duration_ms
          FROM job_run
         WHERE schedule_id = $1 AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')
           AND scheduled_for >= $2 AND scheduled_for < $3) AS r
 GROUP BY GROUPING SETS ((period, status), (period, lag_ms), (period, duration_ms))

-- name: job_run_stats_open_hours
-- What decides which periods of the window (now() - $3 seconds, now()] are closed (ADR
-- 0036): the database clock, the planner's cursor (occurrences before it are all written)
-- and the UTC hours that still hold a run not finished; and how many runs are not
-- finished. Through the tenant's status index: a few rows, except while the tenant has a
-- backlog. $1 tenant, $2 schedule.
SELECT now() AS db_now,
       (SELECT next_fire_at FROM schedule WHERE tenant_id = $1 AND id = $2) AS next_fire_at,
       u.unfinished, COALESCE(u.open_hours, '{}') AS open_hours
  FROM (SELECT count(*) FILTER (WHERE status <> 'running' OR claim_expires_at IS NOT NULL)
                   AS unfinished,
               array_agg(DISTINCT date_bin('1 hour', scheduled_for,
                                           TIMESTAMPTZ '2000-01-01 00:00:00+00')) AS open_hours
          FROM job_run
         WHERE tenant_id = $1 AND status IN ('pending', 'retrying', 'running')
           AND schedule_id = $2
           AND scheduled_for > now() - make_interval(secs => $3)
           AND scheduled_for <= now()) AS u

-- name: job_run_insert_backfill
-- A backfill's runs (RunCommands.backfill, in the transaction that holds the schedule FOR
-- SHARE): one pending run per occurrence, due now, with the planner's deterministic id for
-- that occurrence. ON CONFLICT DO NOTHING: an occurrence that has a run (planned, manual,
-- an earlier backfill) keeps it, so one run per occurrence still holds. $1 tenant,
-- $2 schedule, $3 ids, $4 occurrences, $5 idempotency keys, $6 overlap policy (NULL:
-- allow). The rows land in occurrence order, so equal fire_after claims in that order.
-- $3-$5 are array literals ('{a,b}'), made in the API's CPU lane: asyncpg encodes a list
-- element by element on the event loop (~30 ms for 10,000 instants), a text in one step.
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, trigger,
                     status, fire_after, overlap_policy, flow_key)
SELECT r.id, $1, $2, r.scheduled_for, r.idempotency_key, 'backfill', 'pending', now(),
       $6::text, (SELECT flow_key FROM schedule WHERE id = $2)
FROM unnest($3::text::uuid[], $4::text::timestamptz[], $5::text::text[])
       AS r(id, scheduled_for, idempotency_key)
ON CONFLICT DO NOTHING

-- name: job_run_count_occurrences
-- A dry run's "existing": how many of these occurrences ($3, an array literal made in the
-- CPU lane, as job_run_insert_backfill's) of the schedule have a run. The occurrence key
-- (schedule_id, scheduled_for) answers each.
SELECT count(*) FROM job_run
 WHERE schedule_id = $2 AND tenant_id = $1 AND scheduled_for = ANY ($3::text::timestamptz[])

-- name: job_run_replay_source
-- The run a replay would repeat, with what decides whether it may be: its status, whether
-- it was replayed already, and whether its schedule is still live. $1 tenant, $2 run id.
SELECT r.id, r.scheduled_for, r.schedule_id, r.status, r.replayed_by,
       s.status AS schedule_status
  FROM job_run r
  JOIN schedule s ON s.id = r.schedule_id
 WHERE r.tenant_id = $1 AND r.id = $2

-- name: job_run_dead_letters
-- The bulk replay's choice: this tenant's failed runs not yet replayed, of live schedules,
-- oldest scheduled_for first (job_run_dead_letter_idx). $2 since (inclusive), $3 until
-- (exclusive), $4 limit, $5 schedule or NULL.
SELECT r.id, r.scheduled_for, r.schedule_id
  FROM job_run r
  JOIN schedule s ON s.id = r.schedule_id AND s.status <> 'deleted'
 WHERE r.tenant_id = $1 AND r.status = 'failed' AND r.replayed_by IS NULL
   AND r.scheduled_for >= $2 AND r.scheduled_for < $3
   AND ($5::uuid IS NULL OR r.schedule_id = $5::uuid)
 ORDER BY r.scheduled_for
 LIMIT $4

-- name: job_run_insert_replay
-- Replays of failed runs, in one statement: each original is marked replayed_by its
-- replay under its row lock, and only the originals so marked (still failed, not replayed
-- meanwhile by a concurrent request) get their replay. A replay is a new run (new id, so a
-- new webhook-id) due now at a manual run's kind of instant ($5, never a whole second);
-- replay_of and replay_of_scheduled_for point at the original, whose occurrence is what
-- the delivery carries. No ON CONFLICT: an instant taken meanwhile fails the statement,
-- and the caller tries again with new instants. $1 tenant, $2 originals' ids, $3 their
-- scheduled_for, $4 the replays' ids, $5 their instants, $6 their idempotency keys.
WITH marked AS (
    UPDATE job_run o
       SET replayed_by = r.new_id, updated_at = now()
      FROM unnest($2::uuid[], $3::timestamptz[], $4::uuid[], $5::timestamptz[], $6::text[])
           AS r(id, scheduled_for, new_id, instant, idempotency_key)
     WHERE o.id = r.id AND o.scheduled_for = r.scheduled_for AND o.tenant_id = $1
       AND o.status = 'failed' AND o.replayed_by IS NULL
    RETURNING o.id, o.scheduled_for, o.schedule_id, r.new_id, r.instant, r.idempotency_key
)
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, trigger,
                     status, fire_after, replay_of, replay_of_scheduled_for, flow_key)
SELECT m.new_id, $1, m.schedule_id, m.instant, m.idempotency_key, 'replay', 'pending',
       m.instant, m.id, m.scheduled_for, s.flow_key
  FROM marked m
  JOIN schedule s ON s.id = m.schedule_id
RETURNING id, schedule_id, scheduled_for, status, attempt_count, fire_after,
          first_attempt_at, finished_at, last_status_code, last_error, trigger,
          skip_reason, replay_of, replayed_by

-- name: job_run_stats_skipped
-- The same window's skipped runs by skip_reason ('overlap' or 'misfire'). Apart
-- from job_run_stats_window so that one stays index-only: skip_reason is not in the
-- covering index, and only the skipped runs' rows are read for it. $1 schedule, $2 window
-- seconds.
SELECT COALESCE(skip_reason, 'misfire') AS reason, count(*) AS runs
  FROM job_run
 WHERE schedule_id = $1 AND status = 'skipped'
   AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')  -- the partial index
   AND scheduled_for > now() - make_interval(secs => $2) AND scheduled_for <= now()
 GROUP BY 1

-- name: job_run_outcome_streak
-- Past any window: the failed runs after the latest succeeded one (by occurrence), and
-- when the latest success and failure finished. Index-only over the same index, backwards.
-- $1 schedule.
WITH last_success AS (
    SELECT scheduled_for, finished_at FROM job_run
     WHERE schedule_id = $1 AND status = 'succeeded'
       AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')  -- the partial index
     ORDER BY scheduled_for DESC LIMIT 1
)
SELECT (SELECT count(*) FROM job_run
         WHERE schedule_id = $1 AND status = 'failed'
           AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')
           AND scheduled_for > COALESCE((SELECT scheduled_for FROM last_success), '-infinity'))
           AS consecutive_failures,
       (SELECT finished_at FROM last_success) AS last_success_at,
       (SELECT finished_at FROM job_run WHERE schedule_id = $1 AND status = 'failed'
           AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')
         ORDER BY scheduled_for DESC LIMIT 1) AS last_failure_at
