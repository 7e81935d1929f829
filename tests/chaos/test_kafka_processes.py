"""Kafka mode with real ``cronwire serve`` processes on the real broker (tansu unless
configured): kill -9 and a replica joining mid-run, a broker restart, a rolling flip of
the fleet between modes, and the sweeper's share in a healthy fleet.

Sizes are small in CI; ``CRONWIRE_FULL=1`` runs the issue's full sizes. Each test gets its
own topic and consumer group. Figures are printed (``pytest -s``) for the closing note.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.embedded.postgres import free_port
from cronwire.harness.seeding import (
    non_terminal,
    seed_due_runs,
    seed_schedule,
    seed_tenant,
    status_counts,
)
from cronwire.harness.sink import Reply, Sink, always
from tests.support.replicas import Replica, ReplicaSet

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
FULL = os.environ.get("CRONWIRE_FULL") == "1"
PARTITIONS = 6
_ASSIGNED = re.compile(r"kafka partitions assigned: ([0-9,]*|none)")


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    async with Sink() as running:
        yield running


@pytest.fixture
async def fleet(database_url: str, tmp_path: Path) -> AsyncIterator[ReplicaSet]:
    async with ReplicaSet(database_url, log_dir=tmp_path) as replicas:
        yield replicas


def kafka_settings(bootstrap: str, topic: str, **more: Any) -> dict[str, Any]:
    return dict(claim_source="kafka", kafka_bootstrap_servers=bootstrap, kafka_topic=topic,
                kafka_consumer_group=f"group-{topic}", kafka_partitions=PARTITIONS, **more)


def new_topic() -> str:
    return f"runs-{uuid.uuid4().hex[:10]}"


async def _until(check: Callable[[], Awaitable[bool]], within: float) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 - processes and databases have no event
            await asyncio.sleep(0.1)


async def _seed(pool: asyncpg.Pool, url: str, count: int, tenants: int, first: int = 0) -> None:
    async with pool.acquire() as conn:
        for n in range(tenants):
            schedule = await seed_schedule(conn, await seed_tenant(conn, f"t{n}"), url)
            await seed_due_runs(conn, schedule, count // tenants, first=first)


async def _settled(pool: asyncpg.Pool, within: float) -> None:
    async def done() -> bool:
        return await non_terminal(pool) == 0

    await _until(done, within)


async def _group_stable(replicas: list[Replica], within: float = 60.0) -> None:
    """Every replica's latest assignment is non-empty and together they hold every
    partition once (so a seeded key is consumed at once, not after a rebalance)."""

    async def stable() -> bool:
        held: list[int] = []
        for replica in replicas:
            found = _ASSIGNED.findall(replica.log())
            if not found or found[-1] in ("", "none"):
                return False
            held.extend(int(p) for p in found[-1].split(","))
        return sorted(held) == list(range(PARTITIONS))

    await _until(stable, within)


async def _claims(replicas: list[Replica]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for replica in replicas:
        if not replica.running:
            continue
        for name, value in (await replica.metrics()).items():
            match = re.fullmatch(r'scheduler_claims_total\{source="(\w+)"\}', name)
            if match:
                totals[match[1]] = totals.get(match[1], 0) + value
    return totals


async def _readyz(replica: Replica) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(
        f"{replica.base_url}/readyz", timeout=aiohttp.ClientTimeout(total=5)
    ) as response:
        return response.status, await response.json()


def _report(name: str, **figures: object) -> None:
    print(f"{name}: {json.dumps(figures, sort_keys=True)}")


async def test_a_healthy_kafka_fleet_claims_by_message_and_the_sweeper_stays_small(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, kafka_bootstrap: str
) -> None:
    """Runs fall due in waves the fleet keeps up with: messages carry the claims, and the
    sweeper (runs overdue by the grace that no message delivered) takes almost nothing."""
    waves, wave = (40, 300) if FULL else (12, 240)
    runs = waves * wave
    topic = new_topic()
    replicas = [await fleet.spawn(name, executor_workers=64, **kafka_settings(kafka_bootstrap, topic))
                for name in ("a", "b", "c")]
    await _group_stable(replicas)
    for n in range(waves):
        await _seed(db_pool, sink.url, wave, tenants=12, first=n * wave)
        await sink.wait_for(lambda s, done=(n + 1) * wave: s.unique >= done - wave, within=60)
    await sink.wait_for(lambda s: s.unique == runs, within=120)
    await _settled(db_pool, within=30)
    assert await status_counts(db_pool) == {"succeeded": runs}
    assert sink.duplicates == 0
    claims = await _claims(replicas)
    assert claims.get("postgres", 0) == 0
    assert sum(claims.values()) == runs
    sweeper_share = claims.get("sweeper", 0) / runs
    assert sweeper_share <= 0.05, claims
    for replica in replicas:
        status, body = await _readyz(replica)
        assert status == 200 and body["checks"]["kafka"] is True
        assert await replica.stop() == 0
    _report("kafka_healthy_fleet", runs=runs, claims=claims, sweeper_share=sweeper_share,
            duplicates=sink.duplicates)


async def test_kill_9_and_a_replica_joining_mid_run_lose_nothing(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, kafka_bootstrap: str
) -> None:
    """Duplicates are bounded by the requests the victim had in flight when it died."""
    runs = 12_000 if FULL else 3_000
    sink.behaviour = always(Reply(delay=0.02))
    topic = new_topic()
    settings = kafka_settings(kafka_bootstrap, topic)
    a = await fleet.spawn("a", delivery_timeout=1.0, executor_workers=32, **settings)
    b = await fleet.spawn("b", delivery_timeout=1.0, executor_workers=32, **settings)
    await _group_stable([a, b])
    await _seed(db_pool, sink.url, runs, tenants=12)
    await sink.wait_for(lambda s: s.unique >= runs // 4, within=60)
    a.kill()
    assert await a.wait() == -9
    orphaned = await db_pool.fetchval(
        "SELECT count(*) FROM job_run WHERE status = 'running' AND claimed_by = 'a'")
    c = await fleet.spawn("c", delivery_timeout=1.0, executor_workers=32, **settings)
    await sink.wait_for(lambda s: s.unique == runs, within=120)
    await _settled(db_pool, within=30)
    assert await status_counts(db_pool) == {"succeeded": runs}
    assert sink.duplicates <= orphaned
    claims = await _claims([b, c])
    assert claims.get("kafka", 0) > 0 and claims.get("postgres", 0) == 0
    assert await b.stop() == 0 and await c.stop() == 0
    _report("kafka_kill_9_and_join", runs=runs, orphaned_leases=orphaned, lost=0,
            duplicates=sink.duplicates, survivor_claims=claims)


@contextlib.asynccontextmanager
async def _own_broker(tmp_path: Path) -> AsyncIterator[EmbeddedBroker]:
    broker = EmbeddedBroker(tmp_path / "own-tansu.log", port=free_port("127.0.0.1"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


async def test_a_broker_restart_mid_run_loses_and_duplicates_nothing(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, tmp_path: Path
) -> None:
    """tansu keeps everything in memory: the restart loses the topic, every key in it and
    the committed offsets. The replicas degrade to the sweeper (readyz names kafka), then
    recreate the topic and resume kafka claims without a restart."""
    runs = 6_000 if FULL else 1_500
    sink.behaviour = always(Reply(delay=0.01))
    async with _own_broker(tmp_path) as broker:
        topic = new_topic()
        settings = kafka_settings(broker.bootstrap, topic)
        replicas = [await fleet.spawn(n, executor_workers=16, **settings) for n in ("a", "b")]
        await _group_stable(replicas)
        await _seed(db_pool, sink.url, runs // 2, tenants=6)
        await sink.wait_for(lambda s: s.unique >= runs // 8, within=60)
        # In a thread: the sink shares this event loop, and tansu takes seconds to stop.
        await asyncio.to_thread(broker.stop)

        async def degraded() -> bool:
            answers = [await _readyz(r) for r in replicas]
            return all(s == 503 and b["checks"].get("kafka") is False for s, b in answers)

        await _until(degraded, within=30)
        gauges = [(await r.metrics()).get("scheduler_kafka_broker_up") for r in replicas]
        assert gauges == [0, 0]
        await _seed(db_pool, sink.url, runs // 2, tenants=6, first=100_000)
        await asyncio.to_thread(broker.start)

        async def recovered() -> bool:
            return [(await _readyz(r))[0] for r in replicas] == [200, 200]

        await _until(recovered, within=60)
        await sink.wait_for(lambda s: s.unique == runs, within=120)
        await _settled(db_pool, within=30)
        assert await status_counts(db_pool) == {"succeeded": runs}
        assert sink.duplicates == 0
        claims = await _claims(replicas)
        assert claims.get("sweeper", 0) > 0
        # Kafka claims resume after the restart: new keys are consumed from the new topic.
        before = claims.get("kafka", 0)
        await _seed(db_pool, sink.url, 60, tenants=6, first=200_000)
        await sink.wait_for(lambda s: s.unique == runs + 60, within=60)
        after = await _claims(replicas)
        assert after.get("kafka", 0) > before
        for replica in replicas:
            assert await replica.stop() == 0
    _report("kafka_broker_restart", runs=runs + 60, lost=0, duplicates=sink.duplicates,
            claims=after)


async def test_a_rolling_flip_postgres_kafka_postgres_under_load(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, kafka_bootstrap: str
) -> None:
    """Replicas of both modes side by side while runs keep falling due: one SIGTERM and
    one start at a time, to kafka and back. Nothing lost, nothing delivered twice."""
    wave, pause = (400, 0.2) if FULL else (100, 0.3)
    topic = new_topic()
    kafka = kafka_settings(kafka_bootstrap, topic)
    names = ["a", "b", "c"]
    current = {n: await fleet.spawn(f"{n}0", executor_workers=32) for n in names}
    seeded = 0
    feeding = True

    async def feed() -> None:
        nonlocal seeded
        while feeding:
            await _seed(db_pool, sink.url, wave, tenants=4, first=seeded)
            seeded += wave
            await asyncio.sleep(pause)

    feeder = asyncio.create_task(feed())
    try:
        for generation, settings in ((1, kafka), (2, {})):
            for n in names:
                assert await current[n].stop() == 0
                current[n] = await fleet.spawn(f"{n}{generation}", executor_workers=32,
                                               **settings)
    finally:
        feeding = False
        await feeder
    await sink.wait_for(lambda s: s.unique == seeded, within=120)
    await _settled(db_pool, within=30)
    assert await status_counts(db_pool) == {"succeeded": seeded}
    assert sink.duplicates == 0
    for replica in current.values():
        assert await replica.stop() == 0
    _report("rolling_flip", runs=seeded, lost=0, duplicates=sink.duplicates)


async def test_serve_in_kafka_mode_starts_the_embedded_broker_by_default(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, tmp_path: Path
) -> None:
    replica = await fleet.spawn("solo", claim_source="kafka", home=str(tmp_path / "home"))

    async def ready() -> bool:
        status, body = await _readyz(replica)
        return status == 200 and body["checks"].get("kafka") is True

    await _until(ready, within=60)
    assert "embedded kafka broker (no SCHEDULER_KAFKA_BOOTSTRAP_SERVERS)" in replica.log()
    await _seed(db_pool, sink.url, 20, tenants=2)
    await sink.wait_for(lambda s: s.unique == 20, within=60)
    assert await replica.stop() == 0
    assert "embedded kafka broker stopped" in replica.log()
