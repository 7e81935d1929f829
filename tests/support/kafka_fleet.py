"""Kafka-mode fleets of real ``cronwire serve`` processes, for the chaos tests: settings,
seeding in waves of many tenants, waiting for the consumer group to settle, and the
fleet's claim counters by source."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import asyncpg

from cronwire.harness.seeding import (
    non_terminal,
    seed_due_runs,
    seed_schedule,
    seed_tenant,
    status_counts,
)
from tests.support.polling import wait_until
from tests.support.replicas import Replica

PARTITIONS = 6
_ASSIGNED = re.compile(r"kafka partitions assigned: ([0-9,]*|none)")


def kafka_settings(bootstrap: str, topic: str, **more: Any) -> dict[str, Any]:
    return dict(claim_source="kafka", kafka_bootstrap_servers=bootstrap, kafka_topic=topic,
                kafka_consumer_group=f"group-{topic}", kafka_partitions=PARTITIONS, **more)


def new_topic() -> str:
    return f"runs-{uuid.uuid4().hex[:10]}"


async def until(check: Callable[[], Awaitable[bool]], within: float,
                saw: Callable[[], Awaitable[object]] | None = None) -> None:
    """Processes and databases have no event: poll, and on timeout say what ``saw()`` found."""
    await wait_until(check, within=within, every=0.1, saw=saw)


async def seed(pool: asyncpg.Pool, url: str, count: int, tenants: int, first: int = 0) -> None:
    async with pool.acquire() as conn:
        for n in range(tenants):
            schedule = await seed_schedule(conn, await seed_tenant(conn, f"t{n}"), url)
            await seed_due_runs(conn, schedule, count // tenants, first=first)


async def settled(pool: asyncpg.Pool, within: float) -> None:
    async def done() -> bool:
        return await non_terminal(pool) == 0

    await until(done, within, saw=lambda: status_counts(pool))


async def group_stable(replicas: list[Replica], within: float = 60.0) -> None:
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

    await until(stable, within)


def group_events(replicas: list[Replica], last: int = 4) -> dict[str, list[str]]:
    """Per replica, its partition assignments and warnings (the newest ``last``): what a
    timing assertion shows when it fails, since a rebalance or a lost broker leaves runs to
    the sweeper's full grace and the test's logs are gone by the time anyone reads it."""
    events: dict[str, list[str]] = {}
    for replica in replicas:
        lines = [line.strip() for line in replica.log().splitlines()
                 if "partitions assigned" in line or '"level": "warning"' in line
                 or "overflow" in line]
        events[replica.name] = lines[-last:]
    return events


async def claims_by_source(replicas: list[Replica]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for replica in replicas:
        if not replica.running:
            continue
        for name, value in (await replica.metrics()).items():
            match = re.fullmatch(r'scheduler_claims_total\{source="(\w+)"\}', name)
            if match:
                totals[match[1]] = totals.get(match[1], 0) + value
    return totals


async def readyz(replica: Replica) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(
        f"{replica.base_url}/readyz", timeout=aiohttp.ClientTimeout(total=5)
    ) as response:
        return response.status, await response.json()


def report(name: str, **figures: object) -> None:
    """Print a fleet test's figures (``-s`` shows them); with ``CRONWIRE_TEST_FIGURES``
    naming a file, also append them there as a JSON line, so a whole run's figures
    survive xdist's capture."""
    line = json.dumps(figures, sort_keys=True)
    print(f"{name}: {line}")
    if path := os.environ.get("CRONWIRE_TEST_FIGURES"):
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"test": name, **figures}, sort_keys=True) + "\n")
