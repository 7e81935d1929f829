"""The fleet gauges mean what CONTRACT.md says: backlog is the count of due non-terminal
runs, skew is replica clock minus Postgres now() with the round trip taken out, and the
partitions gauge counts the months ready ahead. Read back through the /metrics exposition."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta

import asyncpg

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.harness.seeding import seed_schedule, seed_tenant
from cronwire.service.maintenance import FleetGauges


class SkewedClock(SystemClock):
    """The system clock set ``offset`` off, as a replica with a wrong clock has it."""

    def __init__(self, offset: timedelta) -> None:
        self._offset = offset

    def now(self) -> datetime:
        return super().now() + self._offset


class SlowRoundTrip(PostgresMaintenanceStore):
    """The real store behind a symmetric network delay on the clock read."""

    def __init__(self, pool: asyncpg.Pool, one_way: float) -> None:
        super().__init__(pool)
        self._one_way = one_way

    async def db_now(self) -> datetime:
        await asyncio.sleep(self._one_way)
        now = await super().db_now()
        await asyncio.sleep(self._one_way)
        return now


def _gauge(metrics: PrometheusMetrics, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", metrics.exposition().decode(), re.MULTILINE)
    assert match, f"{name} not exported"
    return float(match[1])


async def test_backlog_counts_due_non_terminal_runs_only(db_pool: asyncpg.Pool) -> None:
    tenant = await seed_tenant(db_pool)  # type: ignore[arg-type]
    schedule = await seed_schedule(db_pool, tenant, "http://127.0.0.1:9/hook")  # type: ignore[arg-type]
    rows = [  # (status, fire_after offset seconds): negative = due
        *[("pending", -5)] * 3, *[("pending", 600)] * 2, ("retrying", -1), ("retrying", 600),
        *[("running", -30)] * 2, *[("succeeded", -60)] * 2, ("failed", -60),
    ]
    # One base instant for every row: read per statement, a second boundary crossed
    # between two inserts gave two rows the same occurrence (a unique violation, once).
    base = await db_pool.fetchval("SELECT date_trunc('second', now())")
    for i, (status, offset) in enumerate(rows):
        await db_pool.execute(
            "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,"
            " status, fire_after) VALUES (gen_random_uuid(), $1, $2,"
            " $6::timestamptz - make_interval(secs => $3), 'k' || $3::text, $4,"
            " now() + make_interval(secs => $5))",
            tenant, schedule.id, i, status, offset, base,
        )
    expected = await db_pool.fetchval(
        "SELECT count(*) FROM job_run WHERE status IN ('pending', 'retrying', 'running')"
        " AND (status = 'running' OR fire_after <= now())")
    assert expected == 6
    metrics = PrometheusMetrics()
    backlog, _ = await FleetGauges(PostgresMaintenanceStore(db_pool), metrics, SystemClock(),
                                   interval_seconds=5).sample()
    assert backlog == expected
    assert _gauge(metrics, "scheduler_runs_due_backlog") == expected


async def test_an_injected_clock_skew_shows_up(db_pool: asyncpg.Pool) -> None:
    store = PostgresMaintenanceStore(db_pool)
    for offset in (7.0, -3.0):
        metrics = PrometheusMetrics()
        await FleetGauges(store, metrics, SkewedClock(timedelta(seconds=offset)),
                          interval_seconds=5).sample()
        assert abs(_gauge(metrics, "scheduler_clock_skew_seconds") - offset) < 0.5


async def test_skew_is_corrected_for_the_round_trip(db_pool: asyncpg.Pool) -> None:
    metrics = PrometheusMetrics()
    # 0.3 s each way: reading "after" the round trip would report +0.3 s of skew.
    await FleetGauges(SlowRoundTrip(db_pool, 0.3), metrics, SystemClock(),
                      interval_seconds=5).sample()
    assert abs(_gauge(metrics, "scheduler_clock_skew_seconds")) < 0.15


async def test_partitions_ahead_counts_ready_months(db_pool: asyncpg.Pool) -> None:
    store = PostgresMaintenanceStore(db_pool)
    metrics = PrometheusMetrics()
    gauges = FleetGauges(store, metrics, SystemClock(), interval_seconds=5)
    await store.maintain_partitions(2, 3)
    await gauges.sample()
    assert _gauge(metrics, "scheduler_partitions_ahead_months") == 2
    month = await db_pool.fetchval(
        "SELECT to_char(date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month',"
        " 'YYYY_MM')")
    await db_pool.execute(f"DROP TABLE job_run_attempt_p{month}")
    await gauges.sample()
    assert _gauge(metrics, "scheduler_partitions_ahead_months") == 0
