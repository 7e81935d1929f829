"""The executor in-process against real Postgres and a real HTTP sink on loopback:
lost leases, shutdown, failed writes and misbehaving parts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.bootstrap.executor import build_executor
from cronwire.domain.model import RunStatus
from cronwire.harness.sink import Reply, always
from cronwire.service.executor import ExecutorSettings
from cronwire.service.signals import ExecutorSignals
from tests.support.executor_harness import OWNER, Harness, executor_harness, running, sample
from tests.support.secrets import secret_box


@pytest.fixture
async def harness(db_pool: asyncpg.Pool) -> AsyncIterator[Harness]:
    async with executor_harness(db_pool) as harness:
        yield harness


async def test_a_lost_lease_cancels_the_request_and_discards_its_result(harness: Harness) -> None:
    """Lease rule 2: another owner re-claims the run while our request is in flight. The
    next renewal (every lease/3 = 0.5 s, far before the 30 s delivery timeout) finds it
    gone, the request is cancelled, and the only terminal write is the new owner's."""
    hold = asyncio.Event()
    harness.sink.behaviour = always(Reply(hold=hold))
    await harness.schedule(1)
    executor, signals, metrics = harness.executor(lease_seconds=1.5, delivery_timeout=30)
    async with running(executor):
        await harness.sink.wait_for(lambda s: len(s.arrivals) == 1, within=10)
        await harness.pool.execute(
            "UPDATE job_run SET claimed_by = 'other', claim_expires_at = now() + interval '1 min'"
        )
        await signals.abandoned.wait_count(1, within=3)  # not the 30 s timeout
        assert executor.in_flight == 0 and signals.lost.items == signals.abandoned.items
        assert sample(metrics, "scheduler_lease_lost_total") == 1
        hold.set()  # the receiver answers 200 now; nobody is listening any more
        [other] = (await PostgresClaimSource(harness.pool, secret_box(harness.pool)).claim("unused", 1, 1)).runs or [None]
        assert other is None  # still leased by 'other'
        store = PostgresRunStore(harness.pool)
        run_id, scheduled_for, generation = await harness.pool.fetchrow(
            "SELECT id, scheduled_for, lease_generation FROM job_run")
        assert await store.fail_minimal(
            "other", run_id, scheduled_for, "decided by other", generation)
    assert signals.settled.items == []
    row = await harness.pool.fetchrow("SELECT status, claimed_by, last_error FROM job_run")
    assert tuple(row) == ("failed", "other", "decided by other")
    assert await harness.pool.fetchval("SELECT count(*) FROM run_attempt") == 0


async def test_shutdown_drains_in_flight_deliveries_and_leaves_the_rest(harness: Harness) -> None:
    harness.sink.behaviour = always(Reply(delay=0.3))
    await harness.schedule(10)
    executor, signals, _ = harness.executor(workers=4, batch=4, grace_seconds=5)
    async with running(executor) as stopping:
        await harness.sink.wait_for(lambda s: len(s.arrivals) >= 4, within=10)
        claimed = len(signals.claimed.items)
        stopping.set()
    assert len(signals.settled.items) == claimed  # every claimed run finished
    assert signals.released.items == []
    statuses = await harness.statuses()
    assert statuses == {"succeeded": claimed, "pending": 10 - claimed}


async def test_shutdown_releases_what_did_not_finish_but_only_its_own(harness: Harness) -> None:
    """After the grace period unfinished runs are released (attempt given back), except
    one another replica re-claimed meanwhile: release is predicated on the lease too."""
    harness.sink.behaviour = always(Reply(hold=asyncio.Event()))  # never answers
    await harness.schedule(4)
    executor, signals, _ = harness.executor(workers=4, batch=4, grace_seconds=1.0)
    async with running(executor) as stopping:
        await harness.sink.wait_for(lambda s: len(s.arrivals) == 4, within=10)
        taken = await harness.pool.fetchval(
            "UPDATE job_run SET claimed_by = 'other' WHERE id = (SELECT id FROM job_run "
            "ORDER BY id LIMIT 1) RETURNING id")
        stopping.set()
    assert len(signals.released.items) == 4
    rows = await harness.pool.fetch("SELECT id, status, attempt_count, claimed_by FROM job_run")
    for row in rows:
        expected = ("running", 1, "other") if row["id"] == taken else ("pending", 0, OWNER)
        assert (row["status"], row["attempt_count"], row["claimed_by"]) == expected


async def test_a_failing_terminal_write_drives_only_that_run_to_failed(harness: Harness) -> None:
    """One run's terminal write fails in Postgres (a trigger rejects it): the batch is
    written one by one, the others succeed, and the minimal write ends that run failed
    instead of leaving it running to be redelivered."""
    await harness.schedule(5)
    poison = await harness.pool.fetchval("SELECT id FROM job_run ORDER BY id LIMIT 1")
    await harness.pool.execute(f"""
        CREATE FUNCTION reject_one() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.id = '{poison}' AND NEW.status = 'succeeded' THEN
                RAISE EXCEPTION 'disk full (simulated)';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER reject_one BEFORE UPDATE ON job_run
            FOR EACH ROW EXECUTE FUNCTION reject_one();""")
    executor, signals, _ = harness.executor()
    async with running(executor):
        await signals.settled.wait_count(5, within=10)
    rows = {r["id"]: r for r in await harness.pool.fetch("SELECT * FROM job_run")}
    assert rows[poison]["status"] == "failed"
    assert rows[poison]["last_error"].startswith("ResolveFailed")
    assert sorted(r["status"] for r in rows.values()) == ["failed"] + ["succeeded"] * 4


async def test_a_malformed_target_fails_with_evidence_instead_of_crashing(harness: Harness) -> None:
    schedule = await harness.schedule(1)
    await harness.pool.execute(
        "UPDATE schedule SET target = '{\"method\": \"POST\"}'::jsonb WHERE id = $1", schedule.id)
    executor, signals, _ = harness.executor()
    async with running(executor):
        await signals.settled.wait_count(1, within=10)
    row = await harness.pool.fetchrow("SELECT outcome, error FROM run_attempt")
    assert row["outcome"] == "blocked" and row["error"]
    assert await harness.statuses() == {"failed": 1}


class _BrokenDeliverer(LeanDeliverer):
    async def deliver(self, request: object) -> object:  # type: ignore[override]
        raise RuntimeError("adapter bug")


async def test_a_deliverer_that_raises_records_a_retryable_failure(harness: Harness) -> None:
    await harness.schedule(
        1, retry={"max_attempts": 2, "initial_backoff_seconds": 0.01, "max_backoff_seconds": 0.02})
    harness.deliverer = _BrokenDeliverer(TargetGuard(allow_private=True))
    executor, signals, _ = harness.executor()
    async with running(executor):
        await signals.settled.wait_for(
            lambda items: any(s is RunStatus.FAILED for _, s in items), within=10)
    rows = await harness.pool.fetch("SELECT attempt, outcome, error FROM run_attempt "
                                    "ORDER BY attempt")
    assert [(r["attempt"], r["outcome"]) for r in rows] == [(1, "connection_error"),
                                                            (2, "connection_error")]
    assert all("adapter bug" in r["error"] for r in rows)


class _StopsWhileAsked(PostgresClaimSource):
    """A real Postgres claim source whose next-due query is answered just after a stop was
    signalled: the stop lands while the claim loop is busy, not while it sleeps."""

    def __init__(self, pool: asyncpg.Pool, stopping: asyncio.Event) -> None:
        super().__init__(pool, secret_box(pool))
        self._stopping = stopping

    async def seconds_until_due(self) -> float | None:
        seconds = await super().seconds_until_due()
        self._stopping.set()
        await asyncio.sleep(0.05)  # the executor's stop watcher runs and wakes the loop now
        return seconds


async def test_a_stop_signalled_during_a_claim_query_is_not_slept_through(
    harness: Harness,
) -> None:
    # A lost wake-up: the stop set the wake event before the loop cleared it for its next
    # wait, so the loop slept a whole poll interval (30 s here) before it saw the stop.
    stopping = asyncio.Event()
    signals, metrics = ExecutorSignals(), PrometheusMetrics()
    executor = build_executor(
        ExecutorSettings(owner=OWNER, workers=16, batch=16, lease_seconds=6.0,
                         delivery_timeout=3.0, grace_seconds=5.0, poll_seconds=30.0,
                         gauge_seconds=0.1),
        claims=_StopsWhileAsked(harness.pool, stopping), runs=PostgresRunStore(harness.pool),
        breakers=PostgresBreakerStore(harness.pool), deliverer=harness.deliverer,
        metrics=metrics, clock=SystemClock(), signals=signals,
    )
    task = asyncio.create_task(executor.run(stopping))
    await asyncio.wait_for(task, 10)  # well before the 30 s poll interval
