"""Failover under Patroni, the HA manager users run: two Patroni nodes in synchronous
mode with etcd on loopback (tests/support/patroni.py), three `cronwire serve` replicas on
the URL naming both servers, schedules firing every second. The replicas are never
touched. While they fire:

1. kill -9 the leader's Patroni *and* its postmaster (the machine's death as the cluster
   sees it); the other node takes the leader key once its TTL runs out;
2. the killed node is started again and rejoins as the synchronous standby (pg_rewind);
3. a planned switchover back to it with `patronictl switchover`.

Counted from the receiver's side as the chaos harness does (cronwire.chaos.report):
nothing lost, duplicates only for requests in flight at an event, no replica exited.
Figures: how long each event kept deliveries away (the first delivery of a run due after
the event), the leader election time. Printed, and quoted in docs/high-availability.md.

Marker ``deploy`` (root, Patroni and etcd from Debian): `python -m pytest -m deploy`.
Reduced in CI (20 schedules); CRONWIRE_CHAOS_FULL=1 runs 100 schedules (100 runs/s).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from cronwire.bootstrap.factories import fresh_database, open_pool
from cronwire.chaos.plan import ChaosPlan
from cronwire.chaos.queries import Q
from cronwire.chaos.report import Deliveries, Interruption, count_deliveries
from cronwire.chaos.scenario import FaultSpec
from cronwire.chaos.seed import seed
from cronwire.harness.fleet import Fleet, replica_env
from cronwire.harness.seeding import seed_tenant
from cronwire.harness.sink_process import SinkProcess
from tests.support.patroni import TTL, PatroniCluster, patroni_cluster, unavailable

pytestmark = [pytest.mark.deploy, pytest.mark.chaos, pytest.mark.slow,
              pytest.mark.timeout(1800)]

FULL = os.environ.get("CRONWIRE_CHAOS_FULL") == "1"
SCHEDULES = 100 if FULL else 20
WINDOW_SECONDS = 75.0  # the firing window; the three events fit in about 45 s
SETTLE_SECONDS = 4.0  # steady firing between events
RECEIVER_DELAY_MS = 300  # a receiver answering late keeps requests in flight at each event
DRAIN_SECONDS = 120.0
# A new leader within the TTL plus a few loops; deliveries follow within seconds.
ELECTION_BOUND_SECONDS = TTL + 8.0
RESUME_BOUND_SECONDS = 5.0


async def _leases(pool: asyncpg.Pool) -> dict[str, tuple[int, int]]:
    return {str(r["id"]): (r["lease_generation"], r["attempt_count"])
            for r in await pool.fetch(Q["chaos_leases_held"])}


async def _at_next_second() -> None:
    """Just after a whole second: the runs are claimed and their requests out, waiting
    for the receiver's late answers."""
    await asyncio.sleep(1 - time.time() % 1 + 0.1)


async def _drive(cluster: PatroniCluster, pool: asyncpg.Pool) -> tuple[dict[str, Any], list[Interruption]]:
    """The three events; their instants and figures, and the leases held at each."""
    events: dict[str, Any] = {}
    interruptions: list[Interruption] = []
    old = cluster.leader()
    assert old is not None
    other = next(node for node in cluster.nodes if node is not old)

    await asyncio.sleep(SETTLE_SECONDS)
    await _at_next_second()
    leases = await _leases(pool)
    killed_at = time.time()
    await asyncio.to_thread(cluster.kill, old)
    interruptions.append(Interruption(old.name, "kill", killed_at, leases))
    elected_at = await asyncio.to_thread(cluster.wait_leader, other, 60.0)
    events["kill"] = {"at": killed_at, "leases_held": len(leases),
                      "new_leader_seconds": round(elected_at - killed_at, 2)}

    await asyncio.sleep(SETTLE_SECONDS)
    rejoin_at = time.time()
    await asyncio.to_thread(cluster.start, old)
    synced_at = await asyncio.to_thread(cluster.wait_sync_standby, old, 120.0)
    events["rejoin"] = {"at": rejoin_at, "sync_standby_seconds": round(synced_at - rejoin_at, 2)}

    await asyncio.sleep(SETTLE_SECONDS)
    await _at_next_second()
    leases = await _leases(pool)
    switched_at = time.time()
    await asyncio.to_thread(cluster.switchover, other, old)
    interruptions.append(Interruption(other.name, "switchover", switched_at, leases))
    led_at = await asyncio.to_thread(cluster.wait_leader, old, 60.0)
    events["switchover"] = {"at": switched_at, "leases_held": len(leases),
                            "new_leader_seconds": round(led_at - switched_at, 2)}
    return events, interruptions


def _first_delivery_after(events: dict[str, Any], planned: dict[str, float],
                          seen: Deliveries) -> None:
    """Per event: seconds from it to the first delivery of a run due after it, and to the
    delivery of the last run that fell due within RESUME_BOUND_SECONDS after it."""
    for figures in events.values():
        at = figures.pop("at")
        due_after = [(due, run) for run, due in planned.items() if due > at and run in seen.first_seen]
        first = min((seen.first_seen[run] for _due, run in due_after), default=None)
        figures["first_delivery_seconds"] = None if first is None else round(first - at, 2)
        soon = [seen.first_seen[run] - due for due, run in due_after if due <= at + RESUME_BOUND_SECONDS]
        figures["worst_lag_seconds_of_runs_due_next"] = round(max(soon), 2) if soon else None


@pytest.fixture(scope="module")
def cluster() -> Iterator[PatroniCluster]:
    if os.geteuid() != 0:
        pytest.skip("needs root: the Patroni nodes run as the embedded server's service user")
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with patroni_cluster() as running:
        yield running


async def _drain(pool: asyncpg.Pool, sink: SinkProcess, http: aiohttp.ClientSession,
                 planned: int) -> None:
    deadline = time.monotonic() + DRAIN_SECONDS
    while time.monotonic() < deadline:
        try:
            if await sink.unique(http) >= planned:
                return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.5)


async def test_patroni_failover_switchover_and_rejoin_lose_nothing(
    cluster: PatroniCluster, tmp_path: Path,
) -> None:
    dsn = await fresh_database(cluster.dsn(), "cronwire_patroni")
    pool = await open_pool(dsn, 4)
    sink = SinkProcess(tmp_path / "deliveries.jsonl")
    fleet = Fleet(tmp_path / "replicas")
    (tmp_path / "replicas").mkdir()
    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
    spec = FaultSpec(lambda _s: asyncio.sleep(0), sink_delay_ms=RECEIVER_DELAY_MS)
    plan = ChaosPlan(mode="postgres", faults=(), schedules=SCHEDULES, replicas=3,
                     duration=WINDOW_SECONDS, out=tmp_path)
    try:
        await sink.start()
        # The defaults users run (a lease of 2 x 10 s delivery timeout), the harness's pool.
        env = replica_env(dsn, roles="planner,executor", claim_source="postgres",
                          executor_workers=64, shutdown_grace_seconds=3, db_pool_size=6,
                          log_format="text")
        for index in range(3):
            fleet.add(f"patroni-{index}", dict(env))
        await asyncio.gather(*(replica.start() for replica in fleet.replicas))
        tenant = await seed_tenant(pool, "patroni")
        seeded = await seed(pool, spec, plan, sink.base, [tenant])
        await asyncio.sleep(max(0.0, seeded.first.timestamp() - time.time()))
        events, interruptions = await _drive(cluster, pool)
        assert time.time() < seeded.horizon.timestamp() - SETTLE_SECONDS, \
            "the events outlasted the firing window: raise WINDOW_SECONDS"
        await asyncio.sleep(max(0.0, seeded.horizon.timestamp() - time.time()))
        await _drain(pool, sink, http, len(seeded.planned))
        exits = [replica.exit_reason() for replica in fleet.replicas if not replica.running]
        starts = [replica.starts for replica in fleet.replicas]
    finally:
        for replica in fleet.replicas:
            await replica.stop(15)
        await asyncio.to_thread(sink.stop)
        await http.close()
        await pool.close()
    seen = Deliveries.load(tmp_path / "deliveries.jsonl")
    figures: dict[str, Any] = count_deliveries(seeded.planned, seen, interruptions)
    _first_delivery_after(events, seeded.planned, seen)
    figures.update(events=events, replica_exits=exits, schedules=SCHEDULES)
    print(f"\npatroni failover ({SCHEDULES} schedules/s, 3 replicas): "
          f"{json.dumps(figures, sort_keys=True)}")

    assert figures["planned"] > 0 and figures["lost"] == 0, figures
    assert figures["unplanned_deliveries"] == 0
    assert figures["duplicates_beyond_in_flight"] == 0, figures
    assert exits == [] and starts == [1, 1, 1], (exits, starts)  # no replica restarted
    kill, rejoin, switchover = events["kill"], events["rejoin"], events["switchover"]
    assert kill["leases_held"] > 0  # requests were in flight at the kill
    assert kill["new_leader_seconds"] < ELECTION_BOUND_SECONDS, kill
    assert kill["first_delivery_seconds"] < kill["new_leader_seconds"] + RESUME_BOUND_SECONDS, kill
    assert rejoin["first_delivery_seconds"] < RESUME_BOUND_SECONDS, rejoin
    assert switchover["first_delivery_seconds"] < RESUME_BOUND_SECONDS, switchover
