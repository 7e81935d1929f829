"""Hostile receivers (ADR 0026) end to end: real ``cronwire serve`` replicas (the default lean deliverer)
against hostile receivers on loopback, the cases first reproduced that way.

- item 1: two tenants, one receiver that ignores bodies on GET, tenant B's GET body a
  second request: neither tenant's history ever shows the other's answer;
- item 2: a receiver that answers and then keeps streaming: the replica's memory stays
  bounded;
- item 3: one tenant's targets spread over more origins than the replica has file
  descriptors: another tenant's deliveries still succeed (no EMFILE);
- item 4: receivers that never stop sending: each attempt ends within its timeout, the
  runs end with their attempt recorded (no lease lost), and the API answers meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.harness.seeding import SeededSchedule, non_terminal, seed_due_runs, seed_schedule
from tests.support.hostile import (
    SMUGGLED_REQUEST,
    Conn,
    Receiver,
    answer,
    endless_chunk_size_line,
    endless_continue,
    endless_trailers,
    ignores_get_bodies,
    keep_alive_ok,
)
from tests.support.replicas import Replica, ReplicaSet

pytestmark = pytest.mark.slow
ONE_ATTEMPT = {"max_attempts": 1, "initial_backoff_seconds": 0.05, "max_backoff_seconds": 0.2}


@pytest.fixture
async def fleet(database_url: str, tmp_path: Path) -> AsyncIterator[ReplicaSet]:
    async with ReplicaSet(database_url, log_dir=tmp_path) as replicas:
        yield replicas


async def _tenant(pool: asyncpg.Pool, name: str) -> tuple[Any, str]:
    issued = await PostgresTenantStore(pool).create(name)
    return issued.tenant_id, issued.token


async def _schedule(pool: asyncpg.Pool, tenant_id: Any, url: str, **options: Any) -> SeededSchedule:
    async with pool.acquire() as conn:
        return await seed_schedule(conn, tenant_id, url, retry=ONE_ATTEMPT, **options)


async def _settled(pool: asyncpg.Pool, replica: Replica, within: float) -> None:
    async with asyncio.timeout(within):
        while await non_terminal(pool):
            assert replica.running, replica.log()[-3000:]
            await asyncio.sleep(0.2)


async def _excerpts(pool: asyncpg.Pool, tenant_id: Any) -> list[str | None]:
    rows = await pool.fetch(
        """SELECT a.response_excerpt FROM run_attempt a
             JOIN job_run r ON r.id = a.run_id AND r.scheduled_for = a.scheduled_for
            WHERE r.tenant_id = $1 ORDER BY a.started_at""", tenant_id)
    return [row["response_excerpt"] for row in rows]


async def test_tenants_sharing_a_receiver_never_read_each_others_answers(
    db_pool: asyncpg.Pool, fleet: ReplicaSet
) -> None:
    async with Receiver(ignores_get_bodies) as receiver:
        tenant_a, _ = await _tenant(db_pool, "a")
        tenant_b, _ = await _tenant(db_pool, "b")
        a = await _schedule(db_pool, tenant_a, receiver.url("/a"))
        b = await _schedule(db_pool, tenant_b, receiver.url("/b"), method="GET",
                            body=SMUGGLED_REQUEST)
        for n in range(8):  # interleaved due times, one worker: one connection's worth
            await seed_due_runs(db_pool, a, 1, first=2 * n)
            await seed_due_runs(db_pool, b, 1, first=2 * n + 1)
        replica = await fleet.spawn("r", executor_workers=1, executor_batch=1)
        await _settled(db_pool, replica, within=60)
    seen_a, seen_b = await _excerpts(db_pool, tenant_a), await _excerpts(db_pool, tenant_b)
    assert seen_a == ["private-to-A"] * 8, seen_a
    assert "private-to-A" not in seen_b, seen_b


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_a_receiver_streaming_after_its_answer_cannot_grow_a_replica(
    db_pool: asyncpg.Pool, fleet: ReplicaSet
) -> None:
    chunk = b"\0" * 65536

    async def answer_then_stream(conn: Conn) -> None:
        if await conn.request() is None:
            return
        await conn.send(answer(200, b"ok"))
        for _ in range(24_000):  # 1.5 GiB at most, should nothing hang up
            await conn.send(chunk)

    async with Receiver(answer_then_stream) as receiver:
        tenant, _ = await _tenant(db_pool, "streamed-at")
        schedule = await _schedule(db_pool, tenant, receiver.url())
        replica = await fleet.spawn("r", executor_workers=8)
        baseline = _rss_bytes(replica.pid)
        await seed_due_runs(db_pool, schedule, 8)
        await _settled(db_pool, replica, within=60)
        worst = baseline
        until = time.monotonic() + 6  # the replica reached 1.2 GB in 6 s
        while time.monotonic() < until:
            worst = max(worst, _rss_bytes(replica.pid))
            await asyncio.sleep(0.1)
        await receiver.wait_closed_by_clients(within=20)  # every streamer was cut off
    assert worst - baseline < 150 * 1024 * 1024, (baseline, worst)


def _fd_limit(limit: int) -> Callable[[], None]:
    def lower() -> None:  # runs in the child, before exec
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return lower


async def test_many_origins_of_one_tenant_cannot_exhaust_another_tenants_sockets(
    db_pool: asyncpg.Pool, fleet: ReplicaSet
) -> None:
    """More origins than the replica has file descriptors (a wildcard domain, in effect):
    the old pool kept one idle socket per origin for ever, and then EMFILE."""
    limit = 128
    async with contextlib.AsyncExitStack() as stack:
        origins = [await stack.enter_async_context(Receiver(keep_alive_ok))
                   for _ in range(limit)]
        other = await stack.enter_async_context(Receiver(keep_alive_ok))
        wide, _ = await _tenant(db_pool, "wildcard")
        tenant_b, _ = await _tenant(db_pool, "b")
        replica = await fleet.spawn("r", executor_workers=8, preexec_fn=_fd_limit(limit))
        for n, receiver in enumerate(origins):
            await seed_due_runs(db_pool, await _schedule(db_pool, wide, receiver.url()), 1,
                                first=n)
        await _settled(db_pool, replica, within=90)
        b = await _schedule(db_pool, tenant_b, other.url())
        await seed_due_runs(db_pool, b, 5)
        await _settled(db_pool, replica, within=60)
    assert replica.running, replica.log()[-3000:]
    failures = await db_pool.fetch(
        "SELECT tenant_id, last_error FROM job_run WHERE status <> 'succeeded'")
    assert failures == [], [dict(row) for row in failures][:5]
    assert len(other.requests) == 5
    assert "Too many open files" not in replica.log()


async def test_receivers_that_never_stop_sending_hold_no_attempt_past_its_timeout(
    db_pool: asyncpg.Pool, fleet: ReplicaSet
) -> None:
    timeout = 2.0
    async with contextlib.AsyncExitStack() as stack:
        receivers = [await stack.enter_async_context(Receiver(behaviour)) for behaviour in
                     (endless_continue, endless_trailers, endless_chunk_size_line)]
        tenant, token = await _tenant(db_pool, "patient")
        for n, receiver in enumerate(receivers):
            await seed_due_runs(db_pool, await _schedule(db_pool, tenant, receiver.url()), 4,
                                first=10 * n)
        replica = await fleet.spawn("r", roles="api,executor", delivery_timeout=timeout,
                                    executor_workers=16)
        worst_api = 0.0
        async with httpx.AsyncClient(base_url=replica.base_url,
                                     headers={"Authorization": f"Bearer {token}"}) as api:
            async with asyncio.timeout(90):
                while await non_terminal(db_pool):
                    began = time.monotonic()
                    response = await api.get("/v1/runs", params={"limit": 50}, timeout=30)
                    worst_api = max(worst_api, time.monotonic() - began)
                    assert response.status_code == 200, response.text
                    await asyncio.sleep(0.1)
    attempts = await db_pool.fetch("SELECT outcome, duration_ms, error FROM run_attempt")
    assert len(attempts) == 12, [dict(a) for a in attempts]  # every run: its one attempt
    assert max(a["duration_ms"] for a in attempts) < (timeout + 1.5) * 1000, [
        dict(a) for a in attempts]
    lost = await db_pool.fetchval("SELECT count(*) FROM job_run WHERE last_error ILIKE '%lease%'")
    assert lost == 0
    assert worst_api < 2.0, worst_api  # the issue saw GET /v1/runs take 9 s
