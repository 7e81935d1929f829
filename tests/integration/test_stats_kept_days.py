"""Stats from kept summaries of closed days and hours (ADR 0036), over real Postgres: a kept
period gives the answer a scan gives, and one that may still change is never kept."""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta

import asyncpg

from cronwire.adapters.postgres.schedule_stats import KEEP_MIN_RUNS, PostgresStatsReader
from cronwire.domain.stats import WINDOWS
from cronwire.domain.stats_summary import DAY, HOUR, RELATIVE_ERROR
from tests.support.api import Api, api_fixture  # noqa: F401 - fixture

# $4 finished runs of schedule $2 one second apart from $3 (a UTC midnight), statuses
# cycling, lags and durations from $5 and $6 (arrays cycled through).
INSERT_DAY = """
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, status,
                     attempt_count, fire_after, first_attempt_at, finished_at,
                     last_duration_ms, created_at)
SELECT gen_random_uuid(), $1, $2, at, 'kept', st, 1, at,
       CASE WHEN st IN ('succeeded', 'failed')
            THEN at + make_interval(secs => ($5::float8[])[1 + g % cardinality($5::float8[])] / 1000)
       END,
       at + interval '1 second',
       CASE WHEN st IN ('succeeded', 'failed')
            THEN ($6::int[])[1 + g % cardinality($6::int[])] END,
       at  -- written by the planner in time, not as a catch-up
FROM generate_series(0, $4 - 1) AS g,
     LATERAL (SELECT $3::timestamptz + make_interval(secs => g * 7) AS at) AS t,
     LATERAL (SELECT (ARRAY['succeeded', 'succeeded', 'failed', 'skipped',
                            'cancelled'])[1 + g % 5] AS st) AS x
"""
EXACT = """
SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (
           ORDER BY date_part('epoch', first_attempt_at - scheduled_for) * 1000) AS lag,
       percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY last_duration_ms) AS dur
FROM job_run WHERE schedule_id = $1 AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')
  AND scheduled_for > now() - interval '30 days'
"""


async def _setup(api: Api) -> tuple[uuid.UUID, uuid.UUID, datetime]:
    await api.pool.execute("SELECT cronwire_ensure_partitions("
                           "(now() AT TIME ZONE 'UTC' - interval '1 month')::date, 2)")
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant, paused=True)
    today: datetime = await api.pool.fetchval(
        "SELECT date_bin('1 day', now(), TIMESTAMPTZ '2000-01-01 00:00:00+00')")
    return tenant.id, uuid.UUID(schedule["id"]), today


async def _fill(pool: asyncpg.Pool, tenant: uuid.UUID, schedule: uuid.UUID, day: datetime,
                runs: int, lags: list[float], durations: list[int]) -> None:
    await pool.execute(INSERT_DAY, tenant, schedule, day, runs, lags, durations)


async def _stats(reader: PostgresStatsReader, tenant: uuid.UUID, schedule: uuid.UUID,
                 ) -> tuple[int, int, int, list[float | None], list[float | None]]:
    s = await reader.schedule_stats(tenant, schedule, "30d", WINDOWS["30d"])
    return (s.occurrences, s.succeeded, s.failed,
            [s.fire_lag_ms.p50, s.fire_lag_ms.p95, s.fire_lag_ms.p99],
            [s.duration_ms.p50, s.duration_ms.p95, s.duration_ms.p99])


async def test_kept_days_answer_what_a_scan_answers_within_the_stated_error(api: Api) -> None:
    tenant, schedule, today = await _setup(api)
    rng = random.Random(26)
    for back in (3, 4, 6):  # three closed days, each big enough to be kept
        lags = [round(rng.lognormvariate(3, 1.2), 3) for _ in range(97)]
        durations = [int(rng.lognormvariate(6, 1.5)) for _ in range(89)]
        await _fill(api.pool, tenant, schedule, today - timedelta(days=back),
                    KEEP_MIN_RUNS + 200, lags, durations)
    tail: datetime = await api.pool.fetchval(
        "SELECT date_trunc('second', now()) - interval '10 minutes'")
    await _fill(api.pool, tenant, schedule, tail, 50, [1.0, 2.5], [7])  # the open tail
    reader = PostgresStatsReader(api.pool)

    cold = await _stats(reader, tenant, schedule)
    assert reader.kept.periods(schedule) == [(today - timedelta(days=back), DAY)
                                             for back in (6, 4, 3)]
    warm = await _stats(reader, tenant, schedule)
    assert warm == cold  # kept or scanned, the same answer

    exact = await api.pool.fetchrow(EXACT, schedule)
    assert warm[0] == 3 * (KEEP_MIN_RUNS + 200) + 50
    assert (warm[1], warm[2]) == (exact["succeeded"], exact["failed"])
    for got, want in zip(warm[3] + warm[4], list(exact["lag"]) + list(exact["dur"]),
                         strict=True):
        assert got is not None and abs(got - want) <= RELATIVE_ERROR * abs(want) + 0.0005


async def test_a_day_with_a_run_not_finished_is_not_kept(api: Api) -> None:
    tenant, schedule, today = await _setup(api)
    day = today - timedelta(days=2)
    await _fill(api.pool, tenant, schedule, day, KEEP_MIN_RUNS + 10, [5.0], [20])
    late = day + timedelta(hours=23)  # a retry still due, its run not finished
    await api.pool.execute(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                status, attempt_count, fire_after)
           VALUES (gen_random_uuid(), $1, $2, $3, 'late', 'retrying', 1, now())""",
        tenant, schedule, late)
    reader = PostgresStatsReader(api.pool)
    before = await _stats(reader, tenant, schedule)
    assert (day, DAY) not in reader.kept.periods(schedule)
    await api.pool.execute(
        """UPDATE job_run SET status = 'succeeded', first_attempt_at = scheduled_for,
                              finished_at = now(), last_duration_ms = 900000
           WHERE schedule_id = $1 AND scheduled_for = $2""", schedule, late)
    after = await _stats(reader, tenant, schedule)
    assert after[0] == before[0] and after[1] == before[1] + 1
    assert (day, DAY) in reader.kept.periods(schedule)  # closed now, and kept from here on


async def test_a_day_the_planner_has_not_passed_is_not_kept(api: Api) -> None:
    """A resume after a pause (or a planner back from an outage) still writes the missed
    occurrences into past days, under the misfire policy."""
    tenant, schedule, today = await _setup(api)
    day = today - timedelta(days=2)
    await _fill(api.pool, tenant, schedule, day, KEEP_MIN_RUNS + 10, [5.0], [20])
    await api.pool.execute("UPDATE schedule SET next_fire_at = $2 WHERE id = $1",
                           schedule, day + timedelta(hours=23))
    reader = PostgresStatsReader(api.pool)
    before = await _stats(reader, tenant, schedule)
    assert (day, DAY) not in reader.kept.periods(schedule)
    # The planner catches up: the occurrences after its cursor, skipped by the policy.
    await api.pool.execute(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                status, attempt_count, fire_after, finished_at)
           SELECT gen_random_uuid(), $1, $2, $3::timestamptz + g * interval '1 minute',
                  'caught-up', 'skipped', 0, now(), now()
             FROM generate_series(0, 9) AS g""", tenant, schedule, day + timedelta(hours=23))
    await api.pool.execute("UPDATE schedule SET next_fire_at = now() + interval '1 day' "
                           "WHERE id = $1", schedule)
    after = await _stats(reader, tenant, schedule)
    assert after[0] == before[0] + 10
    assert (day, DAY) in reader.kept.periods(schedule)


async def test_the_closed_hours_of_the_windows_first_and_last_day_are_kept(api: Api) -> None:
    """Once the whole days are kept, a request scans only the window's edges; their closed
    hours are kept too, so that it scans an hour or two."""
    tenant, schedule, today = await _setup(api)
    now: datetime = await api.pool.fetchval("SELECT now()")
    head = (now - timedelta(days=30)).replace(minute=0, second=0, microsecond=0)
    for back in range(1, 30):  # every whole day of the window, each worth keeping
        await _fill(api.pool, tenant, schedule, today - timedelta(days=back),
                    KEEP_MIN_RUNS, [5.0], [20])
    edge = head + 2 * HOUR  # an hour of the window's first, partial day
    if edge.date() != head.date():  # the window starts late in a day: one of the last day
        edge = today + HOUR
    await _fill(api.pool, tenant, schedule, edge, 100, [7.5], [30])
    reader = PostgresStatsReader(api.pool)
    first = await _stats(reader, tenant, schedule)
    second = await _stats(reader, tenant, schedule)
    periods = reader.kept.periods(schedule)
    assert (edge, HOUR) in periods
    assert sum(1 for _, length in periods if length == DAY) >= 28
    assert await _stats(reader, tenant, schedule) == second == first
    assert first[0] >= 28 * KEEP_MIN_RUNS + 100
