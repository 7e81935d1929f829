-- The claims' shared tail (migration 0029) without the id array that steered its update to
-- the primary key. Every probe of the index, one per claimed run, carried the whole batch's
-- ids as an "= ANY" condition, and Postgres prepared that array again at each probe: 128
-- comparisons of uuids per claimed run, about a tenth of Postgres's CPU per run in
-- bench_claim_write.py. The array predates the function's enable_seqscan = off and its
-- candidates' ROWS 256 (ADR 0065), which now keep the plan on the primary key by
-- themselves, with or without statistics (tests/integration/test_claim_plan.py checks
-- custom and generic plans under fresh, missing and stale statistics). Nothing else
-- changes: the signature and the candidate type are 0029's, so replicas of the previous
-- version keep calling the same function during an upgrade and get the same rows.
CREATE OR REPLACE FUNCTION cronwire_claim_tail(
    p_owner text, p_limit bigint, p_lease_seconds double precision,
    p_candidates cronwire_claim_candidate[], p_now timestamptz DEFAULT NULL)
RETURNS TABLE (id uuid, tenant_id uuid, schedule_id uuid, scheduled_for timestamptz,
               idempotency_key text, trigger text, status text, attempt_count smallint,
               claim_expires_at timestamptz, lease_generation bigint,
               replay_of_scheduled_for timestamptz, cancel_other boolean, target_json text,
               retry_json text, signing_secret text, previous_signing_secret text, flow text)
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_now constant timestamptz := COALESCE(p_now, now());
BEGIN
    IF COALESCE(cardinality(p_candidates), 0) = 0 THEN
        RETURN;  -- nothing to claim: no plan of the statement below is made or run
    END IF;
    RETURN QUERY
    WITH candidates AS (
        SELECT * FROM cronwire_claim_candidates(p_candidates)
    ),
    -- Flow control (ADR 0040, migration 0012): a run whose key or tenant has a limit takes a
    -- slot of that flow_control row. cronwire_flow_admit locks the rows (a row lock reads the
    -- latest commit, so replicas claiming at once never admit more than a row allows) and says
    -- which candidates are admitted; one not admitted is not picked: it stays pending,
    -- untouched, for a later claim. The function is called only when some candidate may need
    -- a slot (it has a key, or some tenant has a limit): otherwise this costs the claim one
    -- pass over its candidates and one probe of tenant_limited_idx.
    flow_admission AS (
        SELECT a.*
          FROM (SELECT array_agg(c.id) AS ids, array_agg(c.scheduled_for) AS ats,
                       array_agg(c.tenant_id) AS tenants, array_agg(c.flow_key) AS keys,
                       array_agg(c.turn) AS turns, array_agg(c.fire_after) AS fire_afters
                  FROM candidates c
                 WHERE c.status <> 'running'
                   AND (EXISTS (SELECT 1 FROM candidates k WHERE k.flow_key IS NOT NULL)
                        OR COALESCE(current_setting('cronwire.tenant_max_concurrency', true), '') <> ''
                        OR EXISTS (SELECT 1 FROM tenant t WHERE t.max_concurrency IS NOT NULL))) x
         CROSS JOIN LATERAL cronwire_flow_admit(x.ids, x.ats, x.tenants, x.keys, x.turns,
                                                x.fire_afters, v_now) a
         WHERE x.ids IS NOT NULL  -- no candidate may need a slot: the function is not called
    ),
    admitted AS (
        -- slots: what the lease will hold. An expired lease keeps the slots it holds; a run
        -- the function returned takes the slots it says (read only when it may have: CASE
        -- evaluates lazily). A run not admitted is left out, unless it is gated (an overlap
        -- policy): the gate below still decides it (refused), because an occurrence of a
        -- schedule whose run is going is skipped, rests or replaces that run whether or not
        -- its key has a slot. Only a 'lease' needs one.
        SELECT c.*,
               CASE WHEN c.status = 'running' THEN c.flow_slots
                    WHEN (SELECT NOT EXISTS (SELECT 1 FROM flow_admission)) THEN 0::smallint
                    ELSE COALESCE((SELECT f.slots FROM flow_admission f
                                    WHERE f.id = c.id AND f.scheduled_for = c.scheduled_for),
                                  0::smallint) END AS slots,
               CASE WHEN c.overlap_policy IS NULL OR c.status = 'running'
                         OR (SELECT NOT EXISTS (SELECT 1 FROM flow_admission)) THEN false
                    ELSE (c.id, c.scheduled_for) IN (SELECT f.id, f.scheduled_for
                                                       FROM flow_admission f WHERE NOT f.admitted)
                    END AS refused
          FROM candidates c
         -- NOT IN over the refused: one hashed set, not a lookup per candidate, and not even
         -- built when the admission returned nothing.
         WHERE c.status = 'running' OR c.overlap_policy IS NOT NULL
            OR (SELECT NOT EXISTS (SELECT 1 FROM flow_admission))
            OR (c.id, c.scheduled_for) NOT IN (SELECT f.id, f.scheduled_for FROM flow_admission f
                                                WHERE NOT f.admitted)
    ),
    picked AS (
        -- Admitted runs first: a refused gated run meets the gate in the room left over.
        SELECT * FROM admitted ORDER BY refused, turn, fire_after LIMIT p_limit
    ),
    -- The overlap gate (ADR 0033): runs planned under an overlap policy (overlap_policy NOT
    -- NULL) pass through cronwire_overlap_gate (migration 0010; domain/overlap.py states the
    -- same rules), which locks their schedules' rows, decides each one's verdict ('lease',
    -- 'wait', 'skipped', 'cancelled' or 'hold') and moves the gate to the run that starts. It
    -- is a function so that its plan is made and run only when gated runs are picked: with
    -- every schedule on 'allow' it is not called at all, and this statement's plan has no node
    -- of it (ADR 0033 has the measurements).
    gate AS (
        SELECT g.*
          FROM (SELECT array_agg(p.id) AS ids, array_agg(p.scheduled_for) AS ats,
                       array_agg(p.schedule_id) AS schedules, array_agg(p.overlap_policy) AS policies,
                       array_agg(p.status = 'running') AS running
                  FROM picked p WHERE p.overlap_policy IS NOT NULL) a
         CROSS JOIN LATERAL cronwire_overlap_gate(a.ids, a.ats, a.schedules, a.policies, a.running,
                                                  v_now) g
         WHERE a.ids IS NOT NULL  -- nothing gated: the function is not even called
    ),
    decided AS (
        -- The verdict on each candidate; 'lease' takes it, any other value is the terminal
        -- status the run ends in here (it is returned, but not as 'running', so not delivered).
        -- The gate's own verdicts come first (read only for a gated run: CASE evaluates
        -- lazily): 'skipped' and 'cancelled' end the run, 'wait' leaves it runnable with a
        -- later fire_after, and 'hold' leaves it out of the update below. A gated run the
        -- gate would start but flow control refused is held too: it keeps the gate (it is
        -- the next run of its schedule to start) and waits, pending, for a slot. Beyond
        -- those, only an expired lease ('running') can end here:
        --   'cancelled'  its schedule was deleted while it ran: no further attempt may start;
        --   'failed'     its final attempt had started (attempt_started, set by the renewal
        --                once the request left) and may have reached the target, so another
        --                one would exceed the policy. A final attempt that never started is
        --                not used up: it is leased again, under the same attempt number.
        -- 3 and 8 below are RetryPolicy().max_attempts and MAX_ATTEMPTS (domain/model.py),
        -- clamped as retry_from_document does; tests/unit/test_queries.py keeps them equal.
        SELECT p.id, p.scheduled_for,
               CASE WHEN p.gate IS NOT NULL AND p.gate <> 'lease' THEN p.gate
                    WHEN p.refused THEN 'hold'
                    WHEN p.status <> 'running' THEN 'lease'
                    WHEN p.cancel_requested THEN 'cancelled'
                    -- The policy is read only for such a run (CASE evaluates lazily): a
                    -- join here read every claimed run's schedule a second time (the UPDATE
                    -- below reads it for the delivery), ~4% of a burst's claim.
                    WHEN p.attempt_started
                         AND p.attempt_count >= (
                             SELECT LEAST(GREATEST(COALESCE((s.retry ->> 'max_attempts')::integer, 3), 1), 8)
                               FROM schedule s WHERE s.id = p.schedule_id)
                         THEN 'failed'
                    ELSE 'lease' END AS verdict,
               -- Attempt numbers count requests that started: an expired lease whose request
               -- never left keeps its number; everything else gets the next one.
               p.status = 'running' AND NOT p.attempt_started AS same_attempt,
               p.gate, p.ahead, p.tenant_id AS flow_tenant, p.flow_key AS flow,
               CASE WHEN p.status = 'running' THEN p.flow_slots ELSE 0::smallint END AS held_slots,
               p.slots
          FROM (SELECT c.*,
                       CASE WHEN c.overlap_policy IS NOT NULL THEN (
                           SELECT g.verdict FROM gate g
                            WHERE g.id = c.id AND g.scheduled_for = c.scheduled_for) END AS gate,
                       CASE WHEN c.overlap_policy IS NOT NULL THEN (
                           SELECT g.ahead FROM gate g
                            WHERE g.id = c.id AND g.scheduled_for = c.scheduled_for) END AS ahead
                  FROM picked c) p
        UNION ALL
        -- cancel_other: the occupant a newer run replaces ends cancelled now if no lease holds
        -- it (retrying, released: checked by the update); a leased one is ended by its own
        -- lease's next write: its holder finds it superseded (job_run_superseded), aborts the
        -- request in flight and writes it cancelled (job_run_resolve, job_run_give_back).
        SELECT g.overlap_run, g.overlap_run_at, 'superseded', false, 'superseded', NULL,
               NULL::uuid, NULL::text, 0::smallint, 0::smallint
          FROM gate g
         WHERE g.verdict = 'lease' AND g.overlap_policy = 'cancel_other' AND g.busy
           AND g.overlap_run <> ALL (ARRAY(SELECT id FROM picked))
    ),
    flow_counted AS (
        -- Each flow row's slots taken by new leases and given back by expired leases this
        -- claim ends, and the tokens the new leases spend, read from the verdicts (every
        -- verdict but 'hold' lands below: its rows are locked). The rows of new leases are the
        -- ones locked above; an ended lease's row may not be (that write waits for it).
        UPDATE flow_control f
           SET in_flight  = GREATEST(f.in_flight + u.delta, 0),
               tokens     = CASE WHEN f.rate_per_second IS NULL OR u.started = 0 THEN f.tokens
                                 ELSE LEAST(f.burst, f.tokens + f.rate_per_second
                                            * EXTRACT(EPOCH FROM v_now - f.tokens_at))
                                      - u.started END,
               tokens_at  = CASE WHEN f.rate_per_second IS NULL OR u.started = 0 THEN f.tokens_at
                                 ELSE v_now END,
               updated_at = v_now
          FROM (SELECT x.tenant_id, x.key, sum(x.delta)::integer AS delta,
                       sum(GREATEST(x.delta, 0))::integer AS started
                  FROM (SELECT l.flow_tenant AS tenant_id,
                               CASE WHEN b.bit = 1 THEN l.flow ELSE '' END AS key,
                               CASE WHEN l.verdict = 'lease' THEN 1 ELSE -1 END AS delta
                          FROM (SELECT * FROM decided d
                                 WHERE d.slots <> 0 OR d.held_slots <> 0) l
                         CROSS JOIN (VALUES (1), (2)) AS b(bit)
                         WHERE (l.verdict = 'lease' AND l.held_slots = 0 AND l.slots & b.bit <> 0)
                            OR (l.verdict NOT IN ('lease', 'wait', 'superseded', 'hold')
                                AND l.held_slots & b.bit <> 0)) x
                 GROUP BY x.tenant_id, x.key) u
         WHERE f.tenant_id = u.tenant_id AND f.key = u.key
    )
    UPDATE job_run j
       -- Per verdict: 'lease' starts a lease; 'failed', 'cancelled', 'skipped' end the run;
       -- 'superseded' ends an unleased cancel_other occupant; 'wait' (a gated run waiting for
       -- the gate) keeps its state, rests (overlap.wait_seconds: 5 s, 5 s more per run ahead,
       -- at most 60 s; the occupant's end wakes it sooner: job_run_resolve) and is unpublished
       -- (kafka mode: published again when due). Only 'lease' and the claim's own endings are
       -- claimed_by this owner under a new generation.
       SET status           = CASE d.verdict WHEN 'lease' THEN 'running'
                                             WHEN 'wait' THEN j.status
                                             WHEN 'superseded' THEN 'cancelled'
                                             ELSE d.verdict END,
           claimed_by       = CASE WHEN d.verdict IN ('wait', 'superseded') THEN j.claimed_by
                                   ELSE p_owner END,
           -- Lease identity: each claim is a new generation; every later write names it.
           lease_generation = CASE WHEN d.verdict IN ('wait', 'superseded') THEN j.lease_generation
                                   ELSE j.lease_generation + 1 END,
           -- The new lease's request has not started yet; the renewal sets this once it has.
           attempt_started  = CASE WHEN d.verdict = 'lease' THEN false ELSE j.attempt_started END,
           claim_expires_at = CASE WHEN d.verdict = 'lease'
                                   THEN v_now + make_interval(secs => p_lease_seconds) END,
           attempt_count    = CASE WHEN d.verdict <> 'lease' OR d.same_attempt THEN j.attempt_count
                                   ELSE LEAST(j.attempt_count + 1, 8) END,
           -- A run the gate ends or rests was never attempted here.
           first_attempt_at = CASE WHEN d.gate IN ('skipped', 'cancelled', 'wait', 'superseded')
                                   THEN j.first_attempt_at
                                   ELSE COALESCE(j.first_attempt_at, v_now) END,
           fire_after       = CASE WHEN d.verdict = 'wait'
                                   THEN v_now + make_interval(secs => LEAST(60, 5 * (1 + GREATEST(d.ahead, 0))))
                                   ELSE j.fire_after END,
           published_at     = CASE WHEN d.verdict = 'wait' THEN NULL ELSE j.published_at END,
           finished_at      = CASE WHEN d.verdict = 'lease' THEN NULL
                                   WHEN d.verdict = 'wait' THEN j.finished_at ELSE v_now END,
           skip_reason      = CASE WHEN d.verdict = 'skipped' THEN 'overlap' ELSE j.skip_reason END,
           -- The flow slots a lease holds (an expired one re-leased keeps its own); a run
           -- the claim ends holds none. Read only while the run is 'running': the writes that
           -- end a lease leave the column as it was and give its slots back.
           flow_slots       = CASE WHEN d.verdict = 'lease' THEN d.slots
                                   WHEN d.verdict IN ('wait', 'superseded') THEN j.flow_slots
                                   ELSE 0 END,
           last_error       = CASE d.verdict
                                   WHEN 'failed'
                                   THEN 'LeaseExpired: the owner of the final attempt vanished after it started; not delivered again'
                                   WHEN 'cancelled'
                                   THEN CASE WHEN d.gate = 'cancelled'
                                             THEN 'Cancelled: superseded by a newer occurrence (overlap_policy cancel_other)'
                                             ELSE 'Cancelled: the schedule was deleted while this run was in flight' END
                                   WHEN 'superseded'
                                   THEN 'Cancelled: superseded by a newer occurrence (overlap_policy cancel_other)'
                                   WHEN 'skipped'
                                   THEN 'Skipped: the previous run of this schedule was still running (overlap_policy '
                                        || j.overlap_policy || ')'
                                   ELSE j.last_error END,
           updated_at       = v_now
      FROM decided d, schedule s
     -- Each verdict reaches its row by one probe of its partition's primary key. No id array
     -- steers the probes any more (migration 0029 had one): with enable_seqscan and
     -- enable_bitmapscan off and the candidates at ROWS 256, a probe per candidate is the
     -- cheapest plan by itself, and the array cost every probe a pass over the whole
     -- batch's ids (migration 0032, docs/benchmarks.md#levers).
     WHERE j.id = d.id AND j.scheduled_for = d.scheduled_for AND s.id = j.schedule_id
       AND d.verdict <> 'hold'
       -- A superseded occupant is ended here only if no lease holds it (it may have been
       -- claimed since the gate read it: then its own lease's next write ends it).
       AND (d.verdict <> 'superseded'
            OR (j.status IN ('pending', 'retrying')
                AND (j.claim_expires_at IS NULL OR j.claim_expires_at < v_now)))
    RETURNING j.id, j.tenant_id, j.schedule_id, j.scheduled_for, j.idempotency_key, j.trigger,
              j.status, j.attempt_count, j.claim_expires_at, j.lease_generation,
              j.replay_of_scheduled_for,
              -- its holder aborts it once a newer occurrence starts (job_run_superseded)
              j.overlap_policy IS NOT DISTINCT FROM 'cancel_other' AS cancel_other,
              -- As text: parsed once per schedule in the batch, not once per run.
              s.target::text AS target_json, s.retry::text AS retry_json, s.signing_secret,
              CASE WHEN s.previous_secret_expires_at > v_now THEN s.previous_signing_secret END
                  AS previous_signing_secret,
              j.flow_key AS flow;
END
$fn$;

