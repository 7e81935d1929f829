"""Faults on the servers: Postgres restarts and cut connections, the broker killed or
stalled (kafka mode)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter

from cronwire.chaos.scenario import Scenario

KAFKA_SESSION_TIMEOUT_SECONDS = 10.0  # aiokafka's default consumer session timeout


# -- 3. Postgres restarts and connection cuts -------------------------------------------

async def restart_postgres(s: Scenario) -> None:
    assert s.postgres is not None
    outages = []
    for fraction in (0.3, 0.65):
        await asyncio.sleep(s.seconds_to(fraction))
        began = time.monotonic()
        await asyncio.to_thread(s.postgres.stop)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(s.postgres.start)
        outages.append(round(time.monotonic() - began, 2))
    s.figures["fault"] = {"restarts": len(outages), "outage_seconds": outages,
                          "lease_seconds": 2 * s.spec.delivery_timeout}


async def cut_connections(s: Scenario) -> None:
    assert s.proxy is not None
    counts: Counter[str] = Counter()
    longest = 0.0
    while s.window_left() > 1.5:
        await asyncio.sleep(s.rng.uniform(0.4, 1.2))
        action = s.rng.choice(("drop", "reset", "stall"))
        counts[action] += 1
        if action == "drop":
            counts["connections_dropped"] += s.proxy.drop(0.3)
        elif action == "reset":
            counts["connections_reset"] += s.proxy.reset(0.3)
        else:
            seconds = s.rng.uniform(0.3, 2.0)
            longest = max(longest, seconds)
            await s.proxy.stall(seconds)
    s.figures["fault"] = {**counts, "longest_stall_seconds": round(longest, 2),
                          "connections_opened": s.proxy.connections,
                          "lease_seconds": 2 * s.spec.delivery_timeout}


# -- 4. Kafka: the broker dies or stalls -------------------------------------------------

async def restart_broker(s: Scenario) -> None:
    assert s.broker is not None
    for fraction in (0.3, 0.65):
        await asyncio.sleep(s.seconds_to(fraction))
        await asyncio.to_thread(s.broker.stop)  # memory storage: topics and offsets are gone
        await asyncio.to_thread(s.broker.start)
    s.figures["fault"] = {"broker_restarts": 2}


async def stall_broker(s: Scenario) -> None:
    assert s.broker is not None
    process = getattr(s.broker, "_process", None)
    assert process is not None
    await asyncio.sleep(s.seconds_to(0.2))
    seconds = KAFKA_SESSION_TIMEOUT_SECONDS + 2
    process.send_signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(seconds)
    finally:
        process.send_signal(signal.SIGCONT)
    s.figures["fault"] = {"broker_stopped_seconds": seconds}
