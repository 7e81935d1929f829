"""The executor's inner loops (claims, resolution writer, lease keeper) are supervised:
a crash is logged, named in the Supervisor's health (``/readyz`` shows it as
``loop:<name>``), abandons what was in flight and stops the executor, so the replica
never keeps holding leases that nobody renews or writes.

The crash is injected with a test double around the real Postgres adapters that raises
a non-storage exception (a bug, not an outage) from one method.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import aiohttp
import asyncpg
import pytest

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.bootstrap import replica as serve
from cronwire.bootstrap.executor import build_executor
from cronwire.config import Settings
from cronwire.domain.model import ClaimedRun
from cronwire.harness.seeding import seed_due_runs, seed_schedule, seed_tenant
from cronwire.harness.sink import Reply, Sink, always
from cronwire.service.executor import ExecutorSettings
from cronwire.service.signals import ExecutorSignals
from cronwire.service.supervisor import LoopCrashed, Supervisor
from tests.support.replicas import free_port
from tests.support.secrets import TEST_SECRET_KEYS, secret_box


class _Bug(RuntimeError):
    pass


class _CrashingRunStore(PostgresRunStore):
    def __init__(self, pool: asyncpg.Pool, method: str) -> None:
        super().__init__(pool)
        self._method = method

    async def resolve(self, owner: str, resolutions: Sequence[Any]) -> Any:
        if self._method == "resolve":
            raise _Bug("writer bug")
        return await super().resolve(owner, resolutions)

    async def renew_leases(self, *args: Any, **kwargs: Any) -> Any:
        if self._method == "renew_leases":
            raise _Bug("keeper bug")
        return await super().renew_leases(*args, **kwargs)


class _CrashingClaimSource(PostgresClaimSource):
    """Claims normally once, then raises: the claim loop dies with a request in flight."""

    calls = 0

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> Sequence[ClaimedRun]:
        self.calls += 1
        if self.calls > 1:
            raise _Bug("claim loop bug")
        return await super().claim(owner, limit, lease_seconds)


@pytest.mark.parametrize(("crash", "loop"), [
    ("resolve", "executor-writer"),
    ("renew_leases", "executor-leases"),
    ("claim", "executor-claims"),
])
async def test_a_crashed_inner_loop_is_named_in_health_and_stops_the_executor(
    db_pool: asyncpg.Pool, crash: str, loop: str, caplog: pytest.LogCaptureFixture
) -> None:
    hold = asyncio.Event()
    deliverer = LeanDeliverer(TargetGuard(allow_private=True))
    await deliverer.start()
    signals = ExecutorSignals()
    try:
        async with Sink(behaviour=always(Reply(hold=hold if crash != "resolve" else None))) as sink:
            async with db_pool.acquire() as conn:
                schedule = await seed_schedule(conn, await seed_tenant(conn), sink.url)
                await seed_due_runs(conn, schedule, 1)
            claims = (_CrashingClaimSource(db_pool, secret_box(db_pool)) if crash == "claim"
                      else PostgresClaimSource(db_pool, secret_box(db_pool)))
            runs = _CrashingRunStore(db_pool, crash)
            executor = build_executor(
                ExecutorSettings(owner="crashy", workers=4, batch=4, lease_seconds=0.9,
                                 delivery_timeout=30, grace_seconds=2, poll_seconds=0.05),
                claims=claims, runs=runs, breakers=PostgresBreakerStore(db_pool),
                deliverer=deliverer, metrics=PrometheusMetrics(), clock=SystemClock(),
                signals=signals,
            )
            supervisor = Supervisor()
            supervisor.start("executor", executor.run)
            await sink.wait_for(lambda s: len(s.arrivals) == 1, within=15)
            await asyncio.wait_for(supervisor.crashed.wait(), 15)
            health = supervisor.health()
            assert health["executor"] is False and health[loop] is False
            assert supervisor.crashed_loops == [loop]
            assert executor.in_flight == 0  # nothing left behind to renew or write for ever
            task_error = supervisor._tasks["executor"].exception()
            assert isinstance(task_error, LoopCrashed) and task_error.loop == loop
            assert isinstance(task_error.__cause__, _Bug)
            assert f"executor loop {loop} crashed" in caplog.text
            hold.set()
            await supervisor.stop(2)
    finally:
        await deliverer.close()


async def test_a_replica_whose_loop_crashed_is_not_ready_names_it_and_exits_1(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve: /readyz turns 503 naming the inner loop (loop:executor-writer), the other
    loops are drained, and the process ends with status 1 for the orchestrator to
    restart it, instead of running on with a dead executor."""
    observed = asyncio.Event()

    async def crashing(_stopping: asyncio.Event) -> None:
        raise LoopCrashed("executor-writer")

    async def draining(stopping: asyncio.Event) -> None:
        await stopping.wait()
        await observed.wait()  # keep the replica up until /readyz has been read

    async def loops(_container: object, _settings: object) -> dict[str, Any]:
        return {"executor": crashing, "planner": draining}

    monkeypatch.setattr(serve, "role_loops", loops)
    settings = Settings(database_url=database_url, roles=frozenset({"executor"}),
                        http_port=free_port(), db_pool_size=2, shutdown_grace_seconds=10,
                        secret_keys=TEST_SECRET_KEYS)
    replica = asyncio.create_task(serve.run_replica(settings, asyncio.Event()))
    url = f"http://127.0.0.1:{settings.http_port}/readyz"
    try:
        async with asyncio.timeout(20), aiohttp.ClientSession() as session:
            while True:
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(url) as response:
                        body = await response.json()
                        if response.status == 503 and "loop:executor-writer" in body["checks"]:
                            break
                await asyncio.sleep(0.05)
        assert body["checks"]["loop:executor-writer"] is False
        assert body["checks"]["loop:executor"] is False
    finally:
        observed.set()
    with pytest.raises(LoopCrashed, match="executor-writer"):  # `serve` exits 1 on it
        await asyncio.wait_for(replica, 20)
