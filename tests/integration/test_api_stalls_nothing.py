"""The API must not stall the replica (ADR 0055; CONTRACT.md "Tenant isolation in
depth"): a replica's API, claims, lease renewals and result writes share one event loop,
so CPU-heavy API work (backfill walks, stats histograms) runs off it, and the API has a
database pool of its own (SCHEDULER_API_DB_POOL_SIZE).

A real replica (``run_replica``, api and executor roles) runs in this test's event loop
over real Postgres and real sockets, so the loop's own debug mode can time every callback:
``slow_callback_duration = 0.05`` logs any callback that held the loop longer than 50 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import asyncpg
import httpx
import pytest

from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.bootstrap.replica import run_replica
from cronwire.bootstrap.startup import bind_listener
from cronwire.config import Settings
from cronwire.harness.sink import Sink
from cronwire.loopback import free_port
from tests.support.api import DEFAULT_LIMITS, schedule_body
from tests.support.polling import wait_until
from tests.support.secrets import TEST_SECRET_KEYS, secret_box

pytestmark = pytest.mark.asyncio

API_POOL = 3
OWN_POOL = 4
SLOW_CALLBACK_SECONDS = 0.05  # the contract's bound, asserted as is
PROBE_SECONDS = 0.01
# What a coroutine may wait for its turn: generous, for a 2-core box that other test runs
# share (the OS takes the CPU away for tens of ms at times; the worst seen was 0.33 s); the
# walks on the loop made it 5.4 s.
PROBE_LATE_SECONDS = 1.0
# How soon a run triggered beside the load must be delivered: the claim loop polls every
# 0.25 s and an idle replica delivers within ~0.3 s here. Generous: on this shared 2-core
# box (load average 8-10 from other test runs) the worst seen was 1.3 s; with the walks
# on the loop and one shared pool, the loop alone stalled for 5.4 s.
DELIVERED_WITHIN_SECONDS = 3.0
DRY_RUNS = 64
OCCURRENCES = 10_000


@dataclass
class Served:
    client: httpx.AsyncClient
    pool: asyncpg.Pool  # the test's own, to seed and to trigger runs directly
    sink: Sink
    tenant_a: dict[str, str]
    tenant_b: dict[str, str]
    ids: dict[str, uuid.UUID]


@pytest.fixture
async def served(database_url: str, db_pool: asyncpg.Pool) -> AsyncIterator[Served]:
    settings = Settings(secret_keys=TEST_SECRET_KEYS, database_url=database_url, roles=frozenset({"api", "executor"}),
                        http_port=free_port(), allow_private_targets=True,
                        db_pool_size=OWN_POOL, api_db_pool_size=API_POOL,
                        delivery_timeout_seconds=2.0, shutdown_grace_seconds=1.0,
                        instance_id="stalls-nothing", log_format="text")
    stop = asyncio.Event()
    threshold = gc.get_threshold()
    replica = asyncio.create_task(run_replica(settings, stop, bind_listener(settings)))
    tenants = PostgresTenantStore(db_pool)
    a, b = await tenants.create("heavy"), await tenants.create("victim")
    base = f"http://127.0.0.1:{settings.http_port}"
    try:
        async with Sink() as sink, httpx.AsyncClient(base_url=base, timeout=120,
                                                     limits=httpx.Limits(max_connections=200)
                                                     ) as client:
            await wait_until(lambda: _healthy(client), within=30)
            yield Served(client, db_pool, sink,
                         {"Authorization": f"Bearer {a.token}"},
                         {"Authorization": f"Bearer {b.token}"},
                         {"a": a.tenant_id, "b": b.tenant_id})
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(replica, 30)
        gc.unfreeze()  # run_replica tunes the collector for a long-lived replica
        gc.set_threshold(*threshold)


async def _healthy(client: httpx.AsyncClient) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return (await client.get("/healthz")).status_code == 200
    return False


async def _create(served: Served, headers: dict[str, str], **fields: object) -> uuid.UUID:
    response = await served.client.post("/v1/schedules", json=schedule_body(**fields),
                                        headers=headers)
    assert response.status_code == 201, response.text
    return uuid.UUID(response.json()["id"])


async def _victim_schedule(served: Served) -> uuid.UUID:
    """Tenant B's schedule, fired only by triggers (its cron is a year away)."""
    return await _create(served, served.tenant_b, cron="0 0 1 1 *", timezone="UTC",
                         target={"url": served.sink.url, "method": "POST"},
                         retry={"max_attempts": 1})


async def _delivered_after_trigger(served: Served, schedule: uuid.UUID) -> float:
    """Seconds from a manual run written (on the test's own pool) to its delivery and its
    result written by the replica's executor (claim, delivery, result: the replica's pool)."""
    started = time.monotonic()
    run = await PostgresScheduleStore(served.pool, secret_box(served.pool)).trigger(
        served.ids["b"], schedule, max_pending_runs=DEFAULT_LIMITS.max_pending_runs)

    async def succeeded() -> bool:
        status = await served.pool.fetchval("SELECT status FROM job_run WHERE id = $1", run.id)
        return bool(status == "succeeded")

    await wait_until(succeeded, within=30, every=0.01)
    return time.monotonic() - started


async def _healthz_seconds(served: Served) -> float:
    """/healthz's latency as another process sees it (curl; this process's own HTTP client
    shares the loop under test and queues behind its 70 requests in flight)."""
    curl = await asyncio.create_subprocess_exec(
        "curl", "-sf", "-o", "/dev/null", "-w", "%{time_total}",
        f"{served.client.base_url}/healthz", stdout=asyncio.subprocess.PIPE)
    out, _ = await curl.communicate()
    assert curl.returncode == 0
    return float(out)


async def _seed_finished_runs(pool: asyncpg.Pool, tenant: uuid.UUID, schedule: uuid.UUID,
                              count: int, newest: datetime) -> None:
    """``count`` finished runs, one a minute back from ``newest``, each with its own fire lag
    and duration (so the stats' rows are as many as the runs)."""
    await pool.execute(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                status, fire_after, first_attempt_at, finished_at,
                                last_duration_ms, attempt_count)
           SELECT gen_random_uuid(), $1, $2, at, 'seed-' || g, 'succeeded', at,
                  at + (g % 997 + random()) * interval '1 millisecond',
                  at + interval '1 second', (g * 7919) % 100000 / 10.0, 1
             FROM generate_series(1, $4) AS g,
                  LATERAL (SELECT $3::timestamptz - g * interval '1 minute' AS at) AS t""",
        tenant, schedule, newest, count)


@dataclass
class LoopTimes:
    """The loop's longest callbacks: by the loop thread's own CPU time (the work it did:
    what another process or the GIL took from it is not counted) and by wall time; and the
    worst lateness of a probe that asks to wake every 10 ms (what any coroutine waited)."""

    worst_cpu: tuple[float, str] = (0.0, "")
    worst_wall: tuple[float, str] = (0.0, "")
    lateness: list[float] = field(default_factory=list)

    def describe(self) -> str:
        late = sorted(self.lateness)
        return (f"longest callback: {self.worst_cpu[0] * 1000:.1f} ms CPU "
                f"({self.worst_cpu[1]}), {self.worst_wall[0] * 1000:.1f} ms wall; probe "
                f"lateness p99 {late[int(0.99 * (len(late) - 1))] * 1000:.1f} ms, max "
                f"{late[-1] * 1000:.1f} ms over {len(late)} wake-ups")


def _named(handle: asyncio.Handle) -> str:
    """A callback by what it runs: a task's step by the innermost coroutine it stopped in
    (or that it finished, when it finished)."""
    task = getattr(handle._callback, "__self__", None)  # type: ignore[attr-defined]
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    if coro is None:
        return repr(handle)[:160]
    names = []
    while coro is not None and hasattr(coro, "cr_frame"):
        names.append(coro.__qualname__)
        coro = coro.cr_await
    return " > ".join(names[-3:])


@contextlib.asynccontextmanager
async def loop_timed(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LoopTimes]:
    """Time every callback the running loop executes (asyncio.Handle._run is where the
    loop runs each one) and probe its scheduling delay, while the block runs."""
    times = LoopTimes()
    run = asyncio.Handle._run

    def timed(handle: asyncio.Handle) -> None:
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            run(handle)
        finally:
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            if cpu > times.worst_cpu[0]:
                times.worst_cpu = (cpu, _named(handle))
            if wall > times.worst_wall[0]:
                times.worst_wall = (wall, _named(handle))

    async def probe() -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(PROBE_SECONDS)
            times.lateness.append(time.perf_counter() - asked - PROBE_SECONDS)

    monkeypatch.setattr(asyncio.Handle, "_run", timed)
    prober = asyncio.create_task(probe())
    try:
        yield times
    finally:
        prober.cancel()
        monkeypatch.undo()


async def test_64_backfill_dry_runs_stats_explain_and_previews_block_no_callback(
    served: Served, monkeypatch: pytest.MonkeyPatch,
) -> None:
    heavy = await _create(served, served.tenant_a, cron="* * * * * *", timezone="UTC")
    busy = await _create(served, served.tenant_a, cron="* * * * *", timezone="UTC")
    victim = await _victim_schedule(served)
    now: datetime = (await served.pool.fetchval("SELECT now()")).replace(microsecond=0)
    # A 30-day window's history (the previous month's partition too, on early days).
    await served.pool.execute("SELECT cronwire_ensure_partitions("
                              "date_trunc('month', now() - interval '40 days')::date, 3)")
    await _seed_finished_runs(served.pool, served.ids["a"], busy, 40_000,
                              now - timedelta(hours=2))
    window = {"start": (now - timedelta(seconds=OCCURRENCES + 60)).isoformat(),
              "end": (now - timedelta(seconds=60)).isoformat(), "dry_run": True}
    idle_delivery = await _delivered_after_trigger(served, victim)

    async def dry_run() -> httpx.Response:
        return await served.client.post(f"/v1/schedules/{heavy}/backfill", json=window,
                                        headers=served.tenant_a)

    async def stats() -> httpx.Response:
        return await served.client.get(f"/v1/schedules/{busy}/stats",
                                       params={"window": "30d"}, headers=served.tenant_a)

    async def explain() -> httpx.Response:  # walks back up to a day of seconds for the one before
        return await served.client.get(f"/v1/schedules/{heavy}/explain",
                                       params={"at": window["end"]}, headers=served.tenant_a)

    async def preview() -> httpx.Response:
        return await served.client.get(f"/v1/schedules/{heavy}/preview",
                                       params={"count": 1000}, headers=served.tenant_a)

    async with loop_timed(monkeypatch) as times:
        load = [asyncio.create_task(dry_run()) for _ in range(DRY_RUNS)]
        load += [asyncio.create_task(stats()) for _ in range(4)]
        load += [asyncio.create_task(call()) for call in (explain, preview) for _ in range(2)]
        deliveries, healthz = [], []
        while not all(task.done() for task in load):
            deliveries.append(await _delivered_after_trigger(served, victim))
            healthz.append(await _healthz_seconds(served))
        answers = [await task for task in load]

    assert all(r.status_code == 200 for r in answers), [r.text for r in answers
                                                        if r.status_code != 200][:2]
    assert {r.json()["occurrences"] for r in answers[:DRY_RUNS]} == {OCCURRENCES}
    assert {r.json()["succeeded"] for r in answers[DRY_RUNS:DRY_RUNS + 4]} == {40_000}
    assert {len(r.json()["items"]) for r in answers[-2:]} == {1000}
    print(f"{times.describe()}; /healthz max {max(healthz) * 1000:.0f} ms; victim's run "
          f"delivered in {idle_delivery:.2f} s idle, at most {max(deliveries):.2f} s under load")
    assert times.worst_cpu[0] < SLOW_CALLBACK_SECONDS, times.describe()
    assert max(times.lateness) < PROBE_LATE_SECONDS, times.describe()
    assert len(deliveries) >= 2, "the load ended before the victim's runs were measured"
    assert max(deliveries) < DELIVERED_WITHIN_SECONDS, (idle_delivery, deliveries)


async def test_a_saturated_api_pool_leaves_claims_and_results_alone(served: Served) -> None:
    """Every connection of the API's pool waits on a lock (and more API requests queue
    behind them); the executor still claims, delivers and writes results on its own pool."""
    victim = await _victim_schedule(served)
    blocker = await served.pool.acquire()
    requests: list[asyncio.Task[httpx.Response]] = []
    try:
        async with blocker.transaction():
            # Every API request authenticates through api_token first: each now holds an
            # API connection while it waits for this lock.
            await blocker.execute("LOCK TABLE api_token IN ACCESS EXCLUSIVE MODE")
            requests = [asyncio.create_task(served.client.get("/v1/schedules",
                                                              headers=served.tenant_b))
                        for _ in range(4 * API_POOL)]

            async def api_pool_saturated() -> bool:
                waiting = await served.pool.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE '%api_token%' AND pid <> pg_backend_pid()")
                return bool(waiting >= API_POOL)

            await wait_until(api_pool_saturated, within=15)
            took = [await _delivered_after_trigger(served, victim) for _ in range(3)]
            assert not any(task.done() for task in requests)  # the API is still stuck
        answered = await asyncio.gather(*requests)
    finally:
        for task in requests:
            task.cancel()
        await served.pool.release(blocker)
    assert max(took) < DELIVERED_WITHIN_SECONDS, took
    assert {r.status_code for r in answered} == {200}
