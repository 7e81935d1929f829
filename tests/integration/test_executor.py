"""The executor in-process against real Postgres and a real HTTP sink on loopback:
delivery, signing, retries and the circuit breaker (leases and shutdown:
test_executor_leases.py)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import asyncpg
import pytest
from standardwebhooks.webhooks import Webhook

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.domain.breaker import BreakerPolicy
from cronwire.domain.model import RunStatus
from cronwire.harness.seeding import seed_due_runs, seed_schedule, seed_tenant
from cronwire.harness.sink import Reply, always, by_attempt
from cronwire.loopback import free_port as unused_port
from tests.support.executor_harness import OWNER, Harness, executor_harness, running, sample


@pytest.fixture
async def harness(db_pool: asyncpg.Pool) -> AsyncIterator[Harness]:
    async with executor_harness(db_pool) as harness:
        yield harness


async def test_due_runs_are_delivered_signed_and_recorded(harness: Harness) -> None:
    schedule = await harness.schedule(20)
    executor, signals, metrics = harness.executor()
    async with running(executor):
        await signals.settled.wait_count(20, within=10)
    assert await harness.statuses() == {"succeeded": 20}
    assert harness.sink.unique == 20 and harness.sink.duplicates == 0
    evidence = await harness.pool.fetch("SELECT * FROM run_attempt")
    assert len(evidence) == 20
    assert {(e["attempt"], e["outcome"], e["status_code"], e["response_excerpt"], e["claimed_by"])
            for e in evidence} == {(1, "success", 200, "ok", OWNER)}
    assert all(e["finished_at"] >= e["started_at"] and e["duration_ms"] >= 0 for e in evidence)
    arrival = harness.sink.arrivals[0]
    Webhook(schedule.signing_secret).verify(arrival.body, dict(arrival.headers))
    keys = {r["idempotency_key"] for r in await harness.pool.fetch("SELECT idempotency_key FROM job_run")}
    assert harness.sink.acknowledged == keys
    assert sample(metrics, "scheduler_runs_total", outcome="succeeded") == 20
    assert sample(metrics, "scheduler_claims_total", source="postgres") == 20


async def test_never_claims_more_than_idle_workers(harness: Harness) -> None:
    """Lease rule 1: with 4 workers busy on held requests, only those 4 runs are leased;
    the other 26 stay pending (a claim of the batch size would have leased all 30)."""
    hold = asyncio.Event()
    harness.sink.behaviour = always(Reply(hold=hold))
    await harness.schedule(30)
    executor, signals, _ = harness.executor(workers=4, batch=100)
    async with running(executor):
        await harness.sink.wait_for(lambda s: len(s.arrivals) == 4, within=10)
        await signals.claimed.wait_count(4, within=1)
        assert await harness.statuses() == {"running": 4, "pending": 26}
        assert len(signals.claimed.items) == 4
        hold.set()
        await signals.settled.wait_count(30, within=15)
    in_flight, most = 0, 0
    events = sorted([(a.arrived_at, 1) for a in harness.sink.arrivals]
                    + [(a.answered_at or 0.0, -1) for a in harness.sink.arrivals])
    for _, change in events:
        in_flight += change
        most = max(most, in_flight)
    assert most <= 4
    assert await harness.statuses() == {"succeeded": 30}


async def test_an_idle_executor_wakes_when_a_planned_run_becomes_due(harness: Harness) -> None:
    # A run the planner wrote ahead of time starts when it is due, not one poll later: the
    # poll interval here (30 s) would otherwise dominate.
    async with harness.pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), harness.sink.url)
        await seed_due_runs(conn, schedule, 1, due_seconds_ago=-1.5)
    executor, signals, _ = harness.executor(poll_seconds=30.0)
    async with running(executor):
        await signals.settled.wait_for(lambda items: len(items) == 1, within=10)
    late = await harness.pool.fetchval(
        "SELECT extract(epoch FROM first_attempt_at - fire_after) FROM job_run")
    assert 0 <= late < 5  # woke for the run's own time, long before the 30 s poll


async def test_retries_back_off_and_then_succeed(harness: Harness) -> None:
    harness.sink.behaviour = by_attempt({1: Reply(500), 2: Reply(502)})
    await harness.schedule(
        1, retry={"max_attempts": 3, "initial_backoff_seconds": 0.2, "max_backoff_seconds": 0.3}
    )
    executor, signals, _ = harness.executor()
    async with running(executor):
        await signals.settled.wait_for(
            lambda items: any(s is RunStatus.SUCCEEDED for _, s in items), within=10
        )
    arrivals = harness.sink.arrivals
    assert [a.attempt for a in arrivals] == [1, 2, 3]
    gaps = [b.arrived_at - a.answered_at for a, b in itertools.pairwise(arrivals)
            if a.answered_at is not None]
    assert all(0 <= gap < 0.3 + 0.5 for gap in gaps)  # full jitter under the cap, plus polling
    rows = await harness.pool.fetch(
        "SELECT attempt, outcome, status_code FROM run_attempt ORDER BY attempt")
    assert [tuple(r) for r in rows] == [(1, "http_error", 500), (2, "http_error", 502),
                                        (3, "success", 200)]
    run = await harness.pool.fetchrow("SELECT status, attempt_count, last_status_code FROM job_run")
    assert tuple(run) == ("succeeded", 3, 200)


@pytest.mark.parametrize(("retry_after", "cap", "low", "high"), [
    ("1", 5.0, 0.95, 2.5),  # honoured: the next attempt waits at least the asked second
    ("3600", 0.3, 0.0, 1.3),  # capped: never longer than max_backoff_seconds (+ polling)
])
async def test_retry_after_is_honoured_up_to_the_cap(
    harness: Harness, retry_after: str, cap: float, low: float, high: float
) -> None:
    harness.sink.behaviour = by_attempt({1: Reply(503, retry_after=retry_after)})
    await harness.schedule(
        1, retry={"max_attempts": 2, "initial_backoff_seconds": 0.01, "max_backoff_seconds": cap}
    )
    executor, signals, _ = harness.executor()
    async with running(executor):
        await signals.settled.wait_for(
            lambda items: any(s is RunStatus.SUCCEEDED for _, s in items), within=10
        )
    first, second = harness.sink.arrivals
    assert first.answered_at is not None
    assert low <= second.arrived_at - first.answered_at <= high


def _refused() -> tuple[str | None, Reply]:
    return f"http://127.0.0.1:{unused_port()}/hook", Reply()


@pytest.mark.parametrize(("failure", "outcome", "status_code"), [
    ("http_500", "http_error", 500),
    ("timeout", "timeout", None),
    ("refused", "connection_error", None),
])
async def test_a_failing_target_ends_failed_with_evidence_of_every_attempt(
    harness: Harness, failure: str, outcome: str, status_code: int | None
) -> None:
    url, reply = {
        "http_500": (None, Reply(500, body=b"boom")),
        "timeout": (None, Reply(delay=1.0)),
        "refused": _refused(),
    }[failure]
    harness.sink.behaviour = always(reply)
    await harness.schedule(
        1, url=url,
        retry={"max_attempts": 3, "initial_backoff_seconds": 0.01, "max_backoff_seconds": 0.05},
    )
    executor, signals, metrics = harness.executor(delivery_timeout=0.3)
    async with running(executor):
        await signals.settled.wait_for(
            lambda items: any(s is RunStatus.FAILED for _, s in items), within=15
        )
    rows = await harness.pool.fetch(
        "SELECT attempt, outcome, status_code, error, response_excerpt FROM run_attempt "
        "ORDER BY attempt")
    assert [(r["attempt"], r["outcome"], r["status_code"]) for r in rows] == [
        (n, outcome, status_code) for n in (1, 2, 3)]
    assert all(r["error"] for r in rows)
    seen = harness.sink.arrivals
    assert [a.attempt for a in seen] == ([] if failure == "refused" else [1, 2, 3])
    if failure == "http_500":
        assert {r["response_excerpt"] for r in rows} == {"boom"}
    run = await harness.pool.fetchrow("SELECT status, attempt_count FROM job_run")
    assert tuple(run) == ("failed", 3)
    assert sample(metrics, "scheduler_runs_total", outcome="failed") == 1


async def test_a_request_error_is_not_retried(harness: Harness) -> None:
    harness.sink.behaviour = always(Reply(404))
    await harness.schedule(1)
    executor, signals, _ = harness.executor()
    async with running(executor):
        await signals.settled.wait_count(1, within=10)
    assert [a.attempt for a in harness.sink.arrivals] == [1]
    assert await harness.statuses() == {"failed": 1}


async def test_open_breaker_defers_without_an_attempt_then_one_probe_decides(
    harness: Harness,
) -> None:
    harness.sink.behaviour = always(Reply(500))
    once = {"max_attempts": 1, "initial_backoff_seconds": 1, "max_backoff_seconds": 1}
    first = await harness.schedule(2, retry=once)
    policy = BreakerPolicy(failure_threshold=2, cooldown_seconds=1.0, probe_wait_seconds=0.2)
    executor, signals, metrics = harness.executor(breaker_policy=policy)
    async with running(executor):
        await signals.settled.wait_count(2, within=10)
        await harness.until(lambda: _breaker(harness.pool, "open", failures=2))
        async with harness.pool.acquire() as conn:  # three more runs for the same origin
            await seed_due_runs(conn, first, 3, first=10)
        await signals.deferred.wait_count(3, within=5)
        rows = await harness.pool.fetch(
            "SELECT status, attempt_count FROM job_run WHERE status <> 'failed'")
        assert {tuple(r) for r in rows} == {("pending", 0)}  # no attempt consumed
        assert len(harness.sink.arrivals) == 2
        await harness.until(lambda: _gauge_is(metrics, 1.0))
        # Cool-down over: exactly one probe goes out; it fails and the breaker re-opens.
        await harness.sink.wait_for(lambda s: len(s.arrivals) == 3, within=5)
        await harness.until(lambda: _breaker(harness.pool, "open", failures=3))
        assert len(harness.sink.arrivals) == 3
        harness.sink.behaviour = always(Reply(200))
        await signals.settled.wait_for(
            lambda items: sum(s is RunStatus.SUCCEEDED for _, s in items) == 2, within=10
        )
        await harness.until(lambda: _gauge_is(metrics, 0.0))
    assert await harness.statuses() == {"failed": 3, "succeeded": 2}
    assert await harness.pool.fetchval("SELECT state FROM target_breaker") == "closed"
    assert set(await harness.pool.fetch("SELECT DISTINCT attempt FROM run_attempt")) == {(1,)}


async def _gauge_is(metrics: PrometheusMetrics, value: float) -> bool:
    return sample(metrics, "scheduler_breaker_open") == value


async def _breaker(pool: asyncpg.Pool, state: str, *, failures: int) -> bool:
    row = await pool.fetchrow("SELECT state, failures FROM target_breaker")
    return row is not None and (row["state"], row["failures"]) == (state, failures)
