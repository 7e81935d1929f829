"""GET /v1/schedules/{id}/stats over real Postgres, against runs counted by hand."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from tests.support.api import Api, api_fixture  # noqa: F401 - fixture

# (minutes before now, status, fire lag ms, duration ms); None: never started / finished.
RUNS = [
    (120, "succeeded", 1000, 5000),  # outside 1h, inside 24h
    (50, "succeeded", 10, 100),
    (40, "succeeded", 20, 200),
    (30, "failed", 30, 300),
    (20, "skipped", None, None),
    (15, "cancelled", None, None),
    (10, "failed", 40, 400),
    (5, "running", 50, None),
    (-1, "pending", None, None),  # planned ahead: not in any window yet
]


async def _seed(pool: asyncpg.Pool, tenant_id: str, schedule_id: str) -> None:
    await pool.executemany(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                status, fire_after, first_attempt_at, finished_at,
                                last_duration_ms, claim_expires_at, created_at)
           SELECT gen_random_uuid(), $1, $2, t, 'k' || $3::text, $4, t,
                  t + make_interval(secs => $5::float8 / 1000),
                  CASE WHEN $4 IN ('succeeded', 'failed', 'skipped', 'cancelled')
                       THEN t + interval '1 second' END,
                  $6, CASE WHEN $4 = 'running' THEN now() + interval '1 minute' END,
                  t - interval '1 second'  -- the planner writes a run before it is due
             FROM (SELECT date_trunc('second', now()) - make_interval(mins => $3) AS t) AS s""",
        [(uuid.UUID(tenant_id), uuid.UUID(schedule_id), minutes, status, lag, duration)
         for minutes, status, lag, duration in RUNS])


async def _finished(pool: asyncpg.Pool, schedule_id: str, minutes: int) -> datetime:
    value: datetime = await pool.fetchval(
        "SELECT finished_at FROM job_run WHERE schedule_id = $1 AND idempotency_key = $2",
        uuid.UUID(schedule_id), f"k{minutes}")
    return value


async def test_stats_match_the_runs_counted_by_hand(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant, paused=True)
    await _seed(api.pool, str(tenant.id), schedule["id"])

    hour = (await api.client.get(f"/v1/schedules/{schedule['id']}/stats?window=1h",
                                 headers=tenant.headers)).json()
    assert hour == {
        "window": "1h", "occurrences": 7, "succeeded": 2, "failed": 2,
        "skipped": {"overlap": 0, "misfire": 1, "calendar": 0}, "cancelled": 1, "success_rate": 0.5,
        # lags of the finished runs that started: 10, 20, 30, 40 (the running one's joins
        # when it ends); durations of the finished: 100..400
        "fire_lag_ms": {"p50": 20.0, "p95": 40.0, "p99": 40.0},
        "duration_ms": {"p50": 200.0, "p95": 400.0, "p99": 400.0},
        # failed at -30 and -10 minutes, after the latest success at -40
        "consecutive_failures": 2,
        "last_success_at": (await _finished(api.pool, schedule["id"], 40)).isoformat()
        .replace("+00:00", "Z"),
        "last_failure_at": (await _finished(api.pool, schedule["id"], 10)).isoformat()
        .replace("+00:00", "Z"),
    }
    day = (await api.client.get(f"/v1/schedules/{schedule['id']}/stats?window=24h",
                                headers=tenant.headers)).json()
    assert (day["occurrences"], day["succeeded"], day["success_rate"]) == (8, 3, 0.6)
    assert day["fire_lag_ms"] == {"p50": 30.0, "p95": 1000.0, "p99": 1000.0}
    assert day["duration_ms"]["p99"] == 5000.0
    default = (await api.client.get(f"/v1/schedules/{schedule['id']}/stats",
                                    headers=tenant.headers)).json()
    assert default == day


async def test_stats_of_a_schedule_without_runs_are_zeros_and_nulls(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant, paused=True)
    body = (await api.client.get(f"/v1/schedules/{schedule['id']}/stats?window=7d",
                                 headers=tenant.headers)).json()
    assert body["occurrences"] == 0 and body["success_rate"] is None
    assert body["fire_lag_ms"] == {"p50": None, "p95": None, "p99": None}
    assert body["last_success_at"] is None and body["consecutive_failures"] == 0


async def test_stats_refuse_an_unknown_window_and_another_tenants_schedule(api: Api) -> None:
    owner, other = await api.tenant("owner"), await api.tenant("other")
    schedule = await api.create_schedule(owner, paused=True)
    bad = await api.client.get(f"/v1/schedules/{schedule['id']}/stats?window=2h",
                               headers=owner.headers)
    assert bad.status_code == 422 and "window" in bad.json()["error"]["message"]
    foreign = await api.client.get(f"/v1/schedules/{schedule['id']}/stats",
                                   headers=other.headers)
    assert foreign.status_code == 404


async def test_skipped_runs_are_counted_by_their_skip_reason(api: Api) -> None:
    """skip_reason: the overlap policy's skips apart from the misfire policy's
    (a skip recorded before the column existed counts as misfire, as migration 0010 says)."""
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant, paused=True)
    await api.pool.executemany(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                status, fire_after, finished_at, skip_reason)
           SELECT gen_random_uuid(), $1, $2, t, 'k' || $3::text, 'skipped', t, t, $4
             FROM (SELECT date_trunc('second', now()) - make_interval(mins => $3) AS t) AS s""",
        [(tenant.id, uuid.UUID(schedule["id"]), minutes, reason)
         for minutes, reason in [(5, "overlap"), (6, "overlap"), (7, "misfire"), (8, None),
                                 (90, "overlap")]])  # the last one: outside 1h
    hour = (await api.client.get(f"/v1/schedules/{schedule['id']}/stats?window=1h",
                                 headers=tenant.headers)).json()
    assert hour["skipped"] == {"overlap": 2, "misfire": 2, "calendar": 0}
    assert hour["occurrences"] == 4
    day = (await api.client.get(f"/v1/schedules/{schedule['id']}/stats?window=24h",
                                headers=tenant.headers)).json()
    assert day["skipped"] == {"overlap": 3, "misfire": 2, "calendar": 0}


async def test_fire_lag_counts_only_the_runs_the_schedule_fired_on_time(api: Api) -> None:
    """Fire lag is the scheduled runs' lag: a backfilled, replayed or manual
    run starts long after its scheduled_for by design, and a misfire catch-up run (planned
    more than the planner's misfire tolerance after it was due) measures the outage that
    missed it. Their counts still show; their lag does not."""
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant, paused=True)
    # (minutes before now, trigger, minutes after scheduled_for it was written, lag ms)
    runs = [(50, "schedule", -1, 10), (40, "schedule", 0.5, 30),
            (30, "backfill", 600, 4_570_000), (25, "manual", 0, 60_000),
            (20, "replay", 900, 900_000), (15, "schedule", 45, 2_700_000)]
    await api.pool.executemany(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                status, fire_after, first_attempt_at, finished_at,
                                last_duration_ms, trigger, created_at)
           SELECT gen_random_uuid(), $1, $2, t, 'k' || $3::text, 'succeeded', t,
                  t + make_interval(secs => $6::float8 / 1000),
                  t + make_interval(secs => $6::float8 / 1000 + 1), 100, $4,
                  t + make_interval(secs => $5::float8 * 60)
             FROM (SELECT date_trunc('second', now()) - make_interval(mins => $3) AS t) AS s""",
        [(tenant.id, uuid.UUID(schedule["id"]), minutes, trigger, written, lag)
         for minutes, trigger, written, lag in runs])
    stats = (await api.client.get(f"/v1/schedules/{schedule['id']}/stats?window=1h",
                                  headers=tenant.headers)).json()
    assert stats["succeeded"] == 6
    assert stats["fire_lag_ms"] == {"p50": 10.0, "p95": 30.0, "p99": 30.0}
