"""One tenant's flow-control values and receiver cannot slow another tenant's
fires, on two real replicas, in both claim modes (ADR 0055).

The attack of the finding: every 0.3 s the attacker gives its schedule a fresh flow-control
key at the slowest rate it may set, and triggers two runs of it; its receiver answers 429
with ``Retry-After: 999999999999``. Before the bounds (a rate of 5e-324 was accepted) the
token bucket's product underflowed inside the claim that serves every tenant, and the
victim's fire lag went from 1 ms to seconds. The victim's schedules fire every second; the
lag is read at the victim's receiver (its arrival minus ``x-cronwire-scheduled-for``).

CRONWIRE_ATTACK_RATE overrides the attacker's rate (to measure a build that accepted
5e-324, which this build's database refuses); CRONWIRE_CHAOS_FULL=1 runs 15 s instead of 6."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.domain.flow_control import MIN_RATE_PER_SECOND
from cronwire.harness.seeding import (
    DEFAULT_RETRY,
    db_now,
    seed_due_runs,
    seed_firing_schedules,
    seed_flow_control,
    seed_schedule,
    seed_tenant,
)
from cronwire.harness.sink import Arrival, Reply, Sink
from cronwire.harness.stats import percentile
from tests.support.brokers import TANSU, broker_params, claim_mode_settings
from tests.support.kafka_fleet import PARTITIONS, group_stable
from tests.support.replicas import ReplicaSet

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

FULL = os.environ.get("CRONWIRE_CHAOS_FULL") == "1"
SECONDS = 15 if FULL else 6
RATE = float(os.environ.get("CRONWIRE_ATTACK_RATE", MIN_RATE_PER_SECOND))
VICTIM_SCHEDULES = 5
# A fire every second on a 2-core machine running two replicas, a broker and Postgres: the
# victim's p99 stays under this unless another tenant's traffic holds its claims back
# (the attack took it to a median of 6 s before the bounds).
VICTIM_P99_BOUND_MS = 1500.0


def _lag_ms(arrival: Arrival) -> float:
    scheduled = datetime.fromisoformat(arrival.scheduled_for.replace("Z", "+00:00"))
    return (arrival.started - scheduled.timestamp()) * 1000.0


async def _attack(pool: asyncpg.Pool, url: str, until: float) -> int:
    """Fresh keys at RATE, two runs each, every 0.3 s until ``until``; the keys made."""
    tenant = await seed_tenant(pool, "attacker")
    schedule = await seed_schedule(pool, tenant, url, retry={
        "max_attempts": 8, "initial_backoff_seconds": 0.01, "max_backoff_seconds": 86_400})
    keys = 0
    while time.monotonic() < until:
        await seed_flow_control(pool, schedule, f"key-{keys}", rate_per_second=RATE, burst=1)
        await seed_due_runs(pool, schedule, 2, first=2 * keys, due_seconds_ago=0.0)
        keys += 1
        await asyncio.sleep(0.3)
    return keys


@pytest.mark.parametrize("mode", ["postgres", *broker_params(TANSU)])
async def test_a_tenants_slowest_keys_and_parking_receiver_do_not_slow_another_tenant(
        db_pool: asyncpg.Pool, database_url: str, tmp_path: Path, mode: str,
        request: pytest.FixtureRequest) -> None:
    def answer(arrival: Arrival) -> Reply:
        if arrival.path == "/attacker":
            return Reply(status=429, retry_after="999999999999")
        return Reply()

    async with Sink(behaviour=answer) as sink, ReplicaSet(database_url,
                                                           log_dir=tmp_path) as fleet:
        settings = claim_mode_settings(request, mode)
        if mode != "postgres":
            settings["kafka_partitions"] = str(PARTITIONS)
        replicas = [await fleet.spawn(name, roles="planner,executor", **settings)
                    for name in ("a", "b")]
        if mode != "postgres":  # a key seeded before the group settles waits for the sweeper
            await group_stable(replicas)
        victim = await seed_tenant(db_pool, "victim")
        start = await db_now(db_pool) + timedelta(seconds=2)
        await seed_firing_schedules(
            db_pool, victim, VICTIM_SCHEDULES, cron="* * * * * *",
            target={"url": sink.url_for("/victim"), "method": "POST"}, retry=DEFAULT_RETRY,
            first=start, ends_at=start + timedelta(seconds=SECONDS), name="victim")
        keys = await _attack(db_pool, sink.url_for("/attacker"),
                             until=time.monotonic() + 2 + SECONDS)
        await asyncio.sleep(2)  # the last fires' lag is counted too
        lags = sorted(_lag_ms(a) for a in sink.arrivals if a.path == "/victim")
        errors = sum(replica.log().count("out of range") for replica in fleet.replicas)
    expected = VICTIM_SCHEDULES * SECONDS
    p50, p99 = percentile(lags, 0.50), percentile(lags, 0.99)
    figures = (f"mode={mode} rate={RATE:g} keys={keys} victim fires={len(lags)}/{expected} "
               f"p50={p50:.0f} ms p99={p99:.0f} ms claims that raised={errors}")
    print(figures)
    assert len(lags) >= expected - VICTIM_SCHEDULES, f"the victim's fires went missing: {figures}"
    assert errors == 0, f"a shared statement raised: {figures}"
    assert p99 < VICTIM_P99_BOUND_MS, f"another tenant slowed the victim: {figures}"


BACKFILLS = 6
BACKFILL_OCCURRENCES = 10_000


async def _flood(base_url: str, token: str, sink_url: str) -> list[int]:
    """The finding's volume attack through the API: a schedule firing every second, then
    six concurrent backfills of 10,000 occurrences each; the answers' statuses."""
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(f"{base_url}/v1/schedules", json={
                "name": "flood", "cron": "* * * * * *", "target": {"url": sink_url}}) as made:
            assert made.status == 201, await made.text()
            schedule = (await made.json())["id"]
        end = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)

        async def backfill(n: int) -> int:
            start = end - timedelta(seconds=BACKFILL_OCCURRENCES * (n + 1))
            window = {"start": start.isoformat(), "end": (start + timedelta(
                seconds=BACKFILL_OCCURRENCES)).isoformat()}
            async with http.post(f"{base_url}/v1/schedules/{schedule}/backfill",
                                 json=window) as answer:
                return answer.status

        return list(await asyncio.gather(*(backfill(n) for n in range(BACKFILLS))))


@pytest.mark.parametrize("mode", ["postgres", *broker_params(TANSU)])
async def test_a_tenants_sixty_thousand_backfilled_runs_do_not_slow_another_tenant(
        db_pool: asyncpg.Pool, database_url: str, tmp_path: Path, mode: str,
        request: pytest.FixtureRequest) -> None:
    async with Sink() as sink, ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        settings = claim_mode_settings(request, mode)
        if mode != "postgres":
            settings["kafka_partitions"] = str(PARTITIONS)
        # The limits as a deployment has them (the harness lifts them for its own load).
        limits = {"SCHEDULER_API_RATE_PER_SECOND": "50",
                  "SCHEDULER_TENANT_MAX_PENDING_RUNS": "100000"}
        replicas = [await fleet.spawn(name, roles="api,planner,executor", extra_env=limits,
                                      **settings) for name in ("a", "b")]
        if mode != "postgres":
            await group_stable(replicas)
        victim = await seed_tenant(db_pool, "victim")
        start = await db_now(db_pool) + timedelta(seconds=2)
        await seed_firing_schedules(
            db_pool, victim, VICTIM_SCHEDULES, cron="* * * * * *",
            target={"url": sink.url_for("/victim"), "method": "POST"}, retry=DEFAULT_RETRY,
            first=start, ends_at=start + timedelta(seconds=SECONDS), name="victim")
        attacker = await PostgresTenantStore(db_pool).create("attacker")
        statuses = await _flood(replicas[0].base_url, attacker.token, sink.url_for("/attacker"))
        await asyncio.sleep(SECONDS + 4)
        lags = sorted(_lag_ms(a) for a in sink.arrivals if a.path == "/victim")
        flooded = sum(1 for a in sink.arrivals if a.path == "/attacker")
    expected = VICTIM_SCHEDULES * SECONDS
    p50, p99 = percentile(lags, 0.50), percentile(lags, 0.99)
    figures = (f"mode={mode} backfills={statuses} attacker deliveries={flooded} "
               f"victim fires={len(lags)}/{expected} p50={p50:.0f} ms p99={p99:.0f} ms")
    print(figures)
    assert len(lags) >= expected - VICTIM_SCHEDULES, f"the victim's fires went missing: {figures}"
    # Sixty thousand deliveries share the machine with the victim's: a looser bound than
    # the one above (before the limits the p99 was 620-884 ms; seconds would be a fault).
    assert p99 < 2 * VICTIM_P99_BOUND_MS, f"another tenant slowed the victim: {figures}"
