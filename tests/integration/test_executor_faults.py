"""The executor against real Postgres under faults: a database outage while results are
being written (a TCP proxy between the executor and Postgres is cut, which is what a
restart looks like to a client), requests that never left, a delete during a retry, two
processes sharing one instance id.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.bootstrap.executor import build_executor
from cronwire.domain.breaker import BreakerPolicy
from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
from cronwire.harness.seeding import (
    SeededSchedule,
    non_terminal,
    seed_due_runs,
    seed_schedule,
    seed_tenant,
    status_counts,
)
from cronwire.harness.sink import Reply, Sink, always
from cronwire.service.executor import Executor, ExecutorSettings
from cronwire.service.signals import ExecutorSignals
from tests.support.polling import wait_until
from tests.support.secrets import secret_box
from tests.support.tcp_proxy import TcpProxy

OWNER = "faulty-executor"


def _executor(
    pool: asyncpg.Pool, deliverer: LeanDeliverer, **overrides: Any
) -> tuple[Executor, ExecutorSignals, PrometheusMetrics]:
    signals, metrics = ExecutorSignals(), PrometheusMetrics()
    options: dict[str, Any] = dict(
        owner=OWNER, workers=64, batch=64, lease_seconds=6.0, delivery_timeout=3.0,
        grace_seconds=5.0, poll_seconds=0.05, gauge_seconds=0.5,
        breaker_policy=BreakerPolicy(failure_threshold=1000, cooldown_seconds=60),
    )
    options.update(overrides)
    executor = build_executor(
        ExecutorSettings(**options), claims=PostgresClaimSource(pool, secret_box(pool)),
        runs=PostgresRunStore(pool), breakers=PostgresBreakerStore(pool), deliverer=deliverer,
        metrics=metrics, clock=SystemClock(), signals=signals,
    )
    return executor, signals, metrics


def _deliverer() -> LeanDeliverer:
    return LeanDeliverer(TargetGuard(allow_private=True))


@contextlib.asynccontextmanager
async def running(executor: Executor, deliverer: LeanDeliverer) -> AsyncIterator[None]:
    await deliverer.start()
    stopping = asyncio.Event()
    task = asyncio.create_task(executor.run(stopping))
    try:
        yield
    finally:
        stopping.set()
        try:
            await asyncio.wait_for(task, 20)
        finally:
            await deliverer.close()


async def _seed(pool: asyncpg.Pool, url: str, count: int, max_attempts: int) -> SeededSchedule:
    retry = {"max_attempts": max_attempts, "initial_backoff_seconds": 0.05,
             "max_backoff_seconds": 0.1}
    async with pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), url, retry=retry)
        await seed_due_runs(conn, schedule, count)
    return schedule


@pytest.mark.parametrize("max_attempts", [1, 3])
async def test_a_database_outage_shorter_than_the_lease_delivers_nothing_twice(
    database_url: str, db_pool: asyncpg.Pool, max_attempts: int
) -> None:
    """40 requests in flight; the database goes away (every connection dropped, connects
    refused) before their answers come back, for 4 s, well inside the 8 s lease. Every
    result is written once the database is back, and the receiver sees each run once. (It
    used to give each result up at once: the leases expired and all 40 went out again,
    or, on a final attempt, the runs were failed although the target had answered 2xx.)"""
    proxy = await TcpProxy.for_dsn(database_url).start()
    pool = await create_pool(proxy.dsn(database_url), 10)
    hold = asyncio.Event()
    deliverer = _deliverer()
    try:
        async with Sink(behaviour=always(Reply(hold=hold))) as sink:
            await _seed(db_pool, sink.url, 40, max_attempts)
            executor, signals, _ = _executor(
                pool, deliverer, lease_seconds=8.0, delivery_timeout=6.0)
            async with running(executor, deliverer):
                await sink.wait_for(lambda s: len(s.arrivals) == 40, within=20)
                await proxy.cut()
                hold.set()  # the 40 answers arrive while the database is away
                await sink.wait_for(
                    lambda s: all(a.status is not None for a in s.arrivals), within=10)
                await asyncio.sleep(4.0)  # the outage itself: the fault under test, not a wait
                await proxy.restore()

                async def settled() -> bool:
                    return await non_terminal(db_pool) == 0

                await wait_until(settled, within=30)
            assert await status_counts(db_pool) == {"succeeded": 40}
            assert sink.duplicates == 0 and len(sink.arrivals) == 40
            assert signals.lost.items == []
            attempts = await db_pool.fetchval("SELECT count(*) FROM run_attempt")
            assert attempts == 40
    finally:
        await pool.close()
        await proxy.close()


async def test_a_final_attempt_whose_request_never_left_is_still_delivered(
    db_pool: asyncpg.Pool,
) -> None:
    """max_attempts=1, and the process that claimed the run died between the claim and
    the send (a claim whose reply was lost, or a deferral that failed, leave the same
    row). The lease expires; the run is claimed again under the same attempt number and
    delivered. (The claim used to fail it as exhausted: the fire was lost.)"""
    deliverer = _deliverer()
    async with Sink() as sink:
        await _seed(db_pool, sink.url, 1, max_attempts=1)
        [orphan] = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("died-before-sending", 1, 0.2)).runs
        executor, signals, metrics = _executor(db_pool, deliverer)
        async with running(executor, deliverer):
            await signals.settled.wait_count(1, within=15)
        assert [a.attempt for a in sink.arrivals] == [1]
    row = await db_pool.fetchrow("SELECT status, attempt_count, claimed_by FROM job_run")
    assert tuple(row) == ("succeeded", 1, OWNER)
    assert orphan.attempt == 1
    assert metrics.registry.get_sample_value(
        "scheduler_runs_total", {"outcome": "succeeded"}) == 1


async def test_the_renewal_records_that_a_request_started_and_exhaustion_then_applies(
    db_pool: asyncpg.Pool,
) -> None:
    """The other half of the rule: once the renewal has recorded the request as started,
    an expired final attempt is failed by the claim (it may have reached the target), and
    that failure is counted in scheduler_runs_total{outcome="failed"}."""
    hold = asyncio.Event()
    deliverer = _deliverer()
    async with Sink(behaviour=always(Reply(hold=hold))) as sink:
        await _seed(db_pool, sink.url, 1, max_attempts=1)
        executor, _, _ = _executor(db_pool, deliverer, lease_seconds=0.9, delivery_timeout=30)
        async with running(executor, deliverer):
            await sink.wait_for(lambda s: len(s.arrivals) == 1, within=15)

            async def recorded() -> bool:
                return bool(await db_pool.fetchval("SELECT attempt_started FROM job_run"))

            await wait_until(recorded, within=5)  # the renewal runs every 0.3 s
            # Its owner vanishes: the lease is handed to 'gone'. It expires only once this
            # executor has stopped: expired now, this executor's own claim loop could end
            # it first, counting the failure in metrics this test does not read (seen on
            # a loaded machine: the wait for the count below timed out).
            await db_pool.execute("UPDATE job_run SET claimed_by = 'gone', "
                                  "claim_expires_at = now() + interval '1 hour'")
            hold.set()
        await db_pool.execute("UPDATE job_run SET claim_expires_at = now() - interval '1 ms'")
        other, _, metrics = _executor(db_pool, deliverer)
        async with running(other, deliverer):
            async def settled() -> bool:
                return await non_terminal(db_pool) == 0

            await wait_until(settled, within=10)
            await wait_until(lambda: _sampled(metrics, "failed", 1), within=5)
        assert len(sink.arrivals) == 1
    row = await db_pool.fetchrow("SELECT status, last_error FROM job_run")
    assert row["status"] == "failed" and row["last_error"].startswith("LeaseExpired")


async def _sampled(metrics: PrometheusMetrics, outcome: str, value: float) -> bool:
    return metrics.registry.get_sample_value("scheduler_runs_total", {"outcome": outcome}) == value


async def test_no_attempt_starts_after_the_schedule_is_deleted(db_pool: asyncpg.Pool) -> None:
    """DELETE while attempt 1 of 4 is in flight against a failing target: that attempt is
    finished and recorded, then the run ends cancelled; the target sees nothing more.
    (It used to resolve to 'retrying' and be delivered 3 more times after the 204.)"""
    hold = asyncio.Event()
    deliverer = _deliverer()
    async with Sink(behaviour=always(Reply(500, hold=hold))) as sink:
        schedule = await _seed(db_pool, sink.url, 1, max_attempts=4)
        executor, signals, metrics = _executor(db_pool, deliverer)
        async with running(executor, deliverer):
            await sink.wait_for(lambda s: len(s.arrivals) == 1, within=15)
            await PostgresScheduleStore(db_pool, secret_box(db_pool)).delete(schedule.tenant_id, schedule.id)
            hold.set()  # attempt 1 fails (500) after the delete

            async def settled() -> bool:
                return await non_terminal(db_pool) == 0

            await wait_until(settled, within=10)
            await signals.settled.wait_count(1, within=5)
        assert [a.attempt for a in sink.arrivals] == [1]
    row = await db_pool.fetchrow("SELECT status, attempt_count, finished_at FROM job_run")
    assert (row["status"], row["attempt_count"]) == ("cancelled", 1)
    assert row["finished_at"] is not None
    evidence = await db_pool.fetch("SELECT attempt, status_code FROM run_attempt")
    assert [tuple(e) for e in evidence] == [(1, 500)]  # the attempt in flight is recorded
    assert metrics.registry.get_sample_value(
        "scheduler_runs_total", {"outcome": "cancelled"}) == 1


async def test_the_breaker_gauge_counts_open_and_half_open_breakers(db_pool: asyncpg.Pool) -> None:
    """scheduler_breaker_open counts targets whose runs are held back: open, and half-open
    (only its one probe goes out), as the README says; closed ones do not count."""
    async with db_pool.acquire() as conn:
        tenant = await seed_tenant(conn)
        for n, state in enumerate(["open", "half_open", "closed"]):
            await conn.execute(
                "INSERT INTO target_breaker (tenant_id, target_key, state) VALUES ($1, $2, $3)",
                tenant, f"http://127.0.0.1:{n}", state)
    assert await PostgresBreakerStore(db_pool).open_count() == 2


class _SkewedClock(SystemClock):
    """A replica whose wall clock runs ``skew`` ahead of the database's."""

    def __init__(self, skew: timedelta) -> None:
        self.skew = skew

    def now(self) -> datetime:
        return super().now() + self.skew


class _SkewedDeliverer(LeanDeliverer):
    """Timestamps its attempts with the same skewed replica clock."""

    skew = timedelta(0)

    async def deliver(self, request: DeliveryRequest) -> DeliveryResult:
        result = await super().deliver(request)
        return dataclasses.replace(result, started_at=result.started_at + self.skew,
                                   finished_at=result.finished_at + self.skew)

    def begin(self, request: DeliveryRequest) -> None:
        return None  # every attempt goes through deliver(), where the skew is applied


async def test_fire_lag_is_measured_on_the_database_clock(db_pool: asyncpg.Pool) -> None:
    """With the replica's clock 10 minutes fast, the fire lag histogram still shows the
    lag the database sees (first attempt start minus scheduled_for, both on its clock),
    not lag + 10 minutes: the replica's send time is corrected by the offset measured at
    each claim."""
    skew = timedelta(minutes=10)
    deliverer = _SkewedDeliverer(TargetGuard(allow_private=True))
    deliverer.skew = skew
    async with Sink() as sink:
        await _seed(db_pool, sink.url, 5, max_attempts=1)
        signals, metrics = ExecutorSignals(), PrometheusMetrics()
        executor = build_executor(
            ExecutorSettings(owner=OWNER, workers=8, batch=8, lease_seconds=6,
                             delivery_timeout=3, grace_seconds=2, poll_seconds=0.05),
            claims=PostgresClaimSource(db_pool, secret_box(db_pool)),
            runs=PostgresRunStore(db_pool), breakers=PostgresBreakerStore(db_pool),
            deliverer=deliverer, metrics=metrics, clock=_SkewedClock(skew), signals=signals,
        )
        async with running(executor, deliverer):
            await signals.settled.wait_count(5, within=15)
    observed = metrics.registry.get_sample_value("scheduler_fire_lag_seconds_sum") or 0.0
    assert metrics.registry.get_sample_value("scheduler_fire_lag_seconds_count") == 5
    # What the database saw: its claim time (first_attempt_at) minus scheduled_for.
    expected = await db_pool.fetchval(
        "SELECT sum(extract(epoch FROM first_attempt_at - scheduled_for))::float8 FROM job_run")
    assert abs(observed - expected) < 5 * 2.0  # within 2 s a run, not 600 s


async def test_shutdown_during_an_outage_still_ends_within_the_grace(
    database_url: str, db_pool: asyncpg.Pool
) -> None:
    """Results kept for a database that is away are retried, but not past the shutdown
    grace: SIGTERM during an outage still ends the executor in time (the unwritten runs'
    leases expire and they are delivered again, as after a crash)."""
    proxy = await TcpProxy.for_dsn(database_url).start()
    pool = await create_pool(proxy.dsn(database_url), 4)
    deliverer = _deliverer()
    await deliverer.start()
    try:
        async with Sink(behaviour=always(Reply(delay=0.3))) as sink:
            await _seed(db_pool, sink.url, 5, max_attempts=3)
            executor, _, _ = _executor(pool, deliverer, grace_seconds=2.0)
            stopping = asyncio.Event()
            task = asyncio.create_task(executor.run(stopping))
            await sink.wait_for(lambda s: len(s.arrivals) == 5, within=15)
            await proxy.cut()  # the answers come back to a database that is away
            await sink.wait_for(
                lambda s: all(a.status is not None for a in s.arrivals), within=10)
            stopping.set()
            await asyncio.wait_for(task, 2.0 + 3.0)
    finally:
        await deliverer.close()
        await pool.close()
        await proxy.close()


class _StalledRunStore(PostgresRunStore):
    """Renewals wait for ``resume``: a process that stalled (GC pause, SIGSTOP, a hung
    host) past its lease, then carries on."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.resume = asyncio.Event()

    async def renew_leases(self, *args: Any, **kwargs: Any) -> set[Any]:
        await self.resume.wait()
        return await super().renew_leases(*args, **kwargs)


class _StalledClaims(PostgresClaimSource):
    """The stalled process claims nothing more either until ``resume``: only its twin can
    re-claim the run (otherwise the two claim loops race for the expired lease)."""

    def __init__(self, pool: asyncpg.Pool, resume: asyncio.Event) -> None:
        super().__init__(pool, secret_box(pool))
        self._resume = resume
        self._claimed = False

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> Any:
        if self._claimed:
            await self._resume.wait()
        batch = await super().claim(owner, limit, lease_seconds)
        self._claimed = self._claimed or bool(batch.runs)
        return batch


async def test_a_stalled_twin_with_the_same_instance_id_cannot_keep_the_other_ones_lease(
    db_pool: asyncpg.Pool,
) -> None:
    """Two executors share the instance id 'twin'. The first stalls past its lease, the
    second re-claims the run and delivers it. When the first wakes, its renewal names its
    own, older lease generation: it finds the lease gone and abandons its request, instead
    of renewing the second one's lease and going on as if it still held the run."""
    first_answer, second_answer = asyncio.Event(), asyncio.Event()
    replies = iter([Reply(hold=first_answer), Reply(hold=second_answer)])
    deliverer = _deliverer()
    async with Sink(behaviour=lambda _arrival: next(replies)) as sink:
        await _seed(db_pool, sink.url, 1, max_attempts=3)
        stalled_store = _StalledRunStore(db_pool)
        signals = ExecutorSignals()
        stalled = build_executor(
            ExecutorSettings(owner="twin", workers=4, batch=4, lease_seconds=1.0,
                             delivery_timeout=30, grace_seconds=2, poll_seconds=0.05),
            claims=_StalledClaims(db_pool, stalled_store.resume), runs=stalled_store,
            breakers=PostgresBreakerStore(db_pool), deliverer=deliverer,
            metrics=PrometheusMetrics(), clock=SystemClock(), signals=signals,
        )
        live, live_signals, _ = _executor(db_pool, deliverer, owner="twin")
        async with running(stalled, deliverer):
            await sink.wait_for(lambda s: len(s.arrivals) == 1, within=15)
            stopping = asyncio.Event()
            live_task = asyncio.create_task(live.run(stopping))
            try:
                await sink.wait_for(lambda s: len(s.arrivals) == 2, within=15)  # re-claimed
                stalled_store.resume.set()
                await signals.abandoned.wait_count(1, within=5)
                assert stalled.in_flight == 0
                second_answer.set()
                await live_signals.settled.wait_count(1, within=10)
            finally:
                first_answer.set()
                stopping.set()
                await asyncio.wait_for(live_task, 20)
    assert signals.settled.items == []
    row = await db_pool.fetchrow("SELECT status, claimed_by FROM job_run")
    assert tuple(row) == ("succeeded", "twin")
    assert await db_pool.fetchval("SELECT count(*) FROM run_attempt") == 1
