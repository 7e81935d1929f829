"""Faults only a real cluster has, on a 3-node Apache Kafka cluster (each node broker and
controller; replication factor 3, min.insync.replicas 2) under a steady load of kafka-mode
``cronwire serve`` replicas:

* kill -9 of the broker leading most of the topic's partitions (leader election);
* the group coordinator's broker frozen (SIGSTOP) past the consumers' session timeout and
  the controller's broker session timeout, then thawed;
* a restart of the active controller (the KRaft quorum's leader);
* consumer-group rebalances as replicas join and leave.

Each: nothing lost, nothing delivered twice (no replica dies, so no request is in flight
at a kill), and once the cluster is whole again the sweeper's share of new claims is
small. Each test leaves the shared cluster whole (every node running and thawed, every
partition led by its preferred replica).
Figures are printed (``pytest -s``): lost, duplicates, ``recovered_seconds`` (fault to the
last claim the sweeper had to make), the sweeper's share during the fault and after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import asyncpg
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from cronwire.harness.seeding import status_counts
from cronwire.harness.sink import Reply, Sink, always
from tests.support.apache_kafka import LEADER_ELECTION, KafkaCluster
from tests.support.kafka_fleet import (
    claims_by_source,
    group_stable,
    kafka_settings,
    new_topic,
    report,
    seed,
    settled,
    until,
)
from tests.support.replicas import Replica, ReplicaSet

# A cluster's start, the fleet, the fault and the checks take minutes on a busy 2-core box.
pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(480)]
WAVE, EVERY = 48, 0.5  # runs seeded per wave (over 6 tenants), seconds between waves
HEALTHY_SWEEPER_SHARE = 0.05
ELECT_EVERY = 5.0  # seconds between preferred-leader elections while leadership is away


@pytest.fixture
def cluster(apache_kafka_cluster: KafkaCluster | str) -> Iterator[KafkaCluster]:
    assert isinstance(apache_kafka_cluster, KafkaCluster)
    yield apache_kafka_cluster
    for node in apache_kafka_cluster.nodes:  # whole again for the next test
        node.thaw()
        if not node.running:
            apache_kafka_cluster.restart(node.node_id)


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    async with Sink() as running:
        running.behaviour = always(Reply(delay=0.01))
        yield running


async def _admin(bootstrap: str) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await admin.start()
    return admin


async def partition_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    admin = await _admin(bootstrap)
    try:
        [described] = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return {p["partition"]: p["leader"] for p in described["partitions"]}


async def group_coordinator(bootstrap: str, group: str) -> int:
    admin = await _admin(bootstrap)
    try:
        return await admin.find_coordinator(group)
    finally:
        await admin.close()


async def whole(cluster: KafkaCluster, topic: str, within: float = 90.0) -> float:
    """Every node runs, every partition of ``topic`` has all three replicas in sync, and
    every partition of the cluster is led by its preferred replica again; the seconds the
    last took."""

    async def in_sync() -> bool:
        admin = await _admin(cluster.bootstrap)
        try:
            [described] = await admin.describe_topics([topic])
        except Exception:
            return False
        finally:
            await admin.close()
        return all(len(p["isr"]) == 3 for p in described["partitions"])

    await until(in_sync, within)
    started = time.monotonic()
    await led_by_preferred(cluster, within)
    return time.monotonic() - started


@dataclass(frozen=True)
class Misled:
    """A partition led by another replica than its preferred one (the first of its replica
    list), as a fault leaves it."""

    topic: str
    partition: int
    leader: int
    preferred: int
    electable: bool  # the preferred replica is in sync, so an election can succeed


async def _misled(cluster: KafkaCluster) -> list[Misled]:
    admin = await _admin(cluster.bootstrap)
    try:
        described = await admin.describe_topics()  # every topic, internal ones included
    finally:
        await admin.close()
    return [Misled(t["topic"], p["partition"], p["leader"], p["replicas"][0],
                   p["replicas"][0] in p["isr"])
            for t in described for p in t["partitions"]
            if p["replicas"] and p["leader"] != p["replicas"][0]]


async def led_by_preferred(cluster: KafkaCluster, within: float) -> None:
    """Every partition led by its preferred replica, electing those back in sync (the
    election of one still catching up fails, and is asked again; each election costs a
    JVM's start, so at most one every ``ELECT_EVERY`` seconds).

    Left to itself, the controller moves leadership back at its imbalance check, every
    300 s by default, which on the session's shared cluster can fall inside a later
    healthy window: a thawed or restarted node's partitions, and the group's coordinator,
    change leader there, the replicas' keys stall, and the sweepers take the runs. Electing
    here puts that move in the fault's recovery, where loss and duplicates are counted."""
    last_election = -ELECT_EVERY

    async def balanced() -> bool:
        nonlocal last_election
        try:
            misled = await _misled(cluster)
        except Exception:
            return False
        if not misled:
            return True
        if (any(m.electable for m in misled)
                and time.monotonic() - last_election >= ELECT_EVERY):
            last_election = time.monotonic()
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                await asyncio.to_thread(cluster.tool, LEADER_ELECTION, "--election-type",
                                        "PREFERRED", "--all-topic-partitions", within=30.0)
        return False

    await until(balanced, within, saw=lambda: _misled(cluster))


@dataclass
class Load:
    """Waves of due runs every ``EVERY`` seconds, and the fleet's claims sampled as they go
    (a replica's counters are read while it runs, so a leaving one is counted first)."""

    pool: asyncpg.Pool
    sink: Sink
    replicas: list[Replica]
    seeded: int = 0
    samples: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    gone: dict[str, float] = field(default_factory=dict)  # claims of replicas that left
    _running: bool = True

    async def run(self) -> None:
        while self._running:
            await seed(self.pool, self.sink.url, WAVE, tenants=6, first=self.seeded)
            self.seeded += WAVE
            await self.sample()
            await asyncio.sleep(EVERY)

    async def sample(self) -> dict[str, float]:
        totals = dict(self.gone)
        for source, value in (await claims_by_source(self.replicas)).items():
            totals[source] = totals.get(source, 0) + value
        self.samples.append((time.monotonic(), totals))
        return totals

    async def leave(self, replica: Replica) -> None:
        """SIGTERM a replica, keeping the claims it made."""
        for source, value in (await claims_by_source([replica])).items():
            self.gone[source] = self.gone.get(source, 0) + value
        self.replicas.remove(replica)
        assert await replica.stop() == 0

    def stop(self) -> None:
        self._running = False

    def sweeper_after(self, instant: float) -> float:
        """Seconds from ``instant`` to the last sample in which the sweeper's count rose."""
        last, previous = instant, None
        for at, totals in self.samples:
            sweeper = totals.get("sweeper", 0)
            if previous is not None and at > instant and sweeper > previous:
                last = at
            previous = sweeper
        return last - instant


@contextlib.asynccontextmanager
async def loaded_fleet(pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet,
                       cluster: KafkaCluster, names: tuple[str, ...] = ("a", "b"),
                       ) -> AsyncIterator[tuple[Load, dict[str, object]]]:
    """A kafka-mode fleet on a fresh topic under load; on leaving: nothing lost or
    delivered twice, and the sweeper's share of a healthy cluster's claims is small."""
    topic = new_topic()
    settings = kafka_settings(cluster.bootstrap, topic)
    replicas = [await fleet.spawn(n, executor_workers=32, **settings) for n in names]
    await group_stable(replicas)
    load = Load(pool, sink, replicas)
    feeder = asyncio.create_task(load.run())
    figures: dict[str, object] = {"topic": topic, "settings": settings}
    try:
        await sink.wait_for(lambda s: s.unique >= 4 * WAVE, within=60)
        yield load, figures
    finally:
        load.stop()
        await feeder
    figures["preferred_leaders_seconds"] = round(await whole(cluster, topic), 1)
    await sink.wait_for(lambda s: s.unique == load.seeded, within=120)
    await settled(pool, within=60)
    assert await status_counts(pool) == {"succeeded": load.seeded}
    assert sink.duplicates == 0
    figures.update(runs=load.seeded, lost=load.seeded - sink.unique, duplicates=sink.duplicates)
    # Healthy again: waves come by message alone again, and stay so.
    clean = await _first_clean_wave(load)
    # Heal (or first join) to the end of the first wave claimed by message alone.
    figures["kafka_recovered_seconds"] = round(clean - float(figures["_healed_at"]), 1)  # type: ignore[arg-type]
    before, window = await load.sample(), await pool.fetchval("SELECT now()")
    for _ in range(6):
        await seed(pool, sink.url, WAVE, tenants=6, first=load.seeded)
        load.seeded += WAVE
        await asyncio.sleep(EVERY)
    await sink.wait_for(lambda s: s.unique == load.seeded, within=60)
    after = await load.sample()
    share = (after.get("sweeper", 0) - before.get("sweeper", 0)) / (6 * WAVE)
    figures["healthy_sweeper_share"] = round(share, 3)
    overflows = await pool.fetch(
        "SELECT owner, until FROM kafka_overflow WHERE until > $1", window)
    assert share <= HEALTHY_SWEEPER_SHARE, (before, after, [tuple(r) for r in overflows])
    for replica in load.replicas:
        assert await replica.stop() == 0


CLEAN_WAVES_IN_A_ROW = 3


async def _first_clean_wave(load: Load, within: float = 120.0) -> float:
    """The instant the first of ``CLEAN_WAVES_IN_A_ROW`` waves in a row is claimed by
    message alone (the group has re-formed, every partition has a leader and a consumer):
    waves one at a time, each delivered before the next. One clean wave was not enough:
    a thawed broker's partitions and the group could still be settling after a lucky
    wave, and the healthy share measured next then counted the settling (0.094 once)."""
    first_clean: float | None = None
    in_a_row = 0
    swept: list[float] = []
    try:
        async with asyncio.timeout(within):
            while in_a_row < CLEAN_WAVES_IN_A_ROW:
                before = (await load.sample()).get("sweeper", 0)
                await seed(load.pool, load.sink.url, WAVE, tenants=6, first=load.seeded)
                load.seeded += WAVE
                await load.sink.wait_for(lambda s: s.unique == load.seeded, within=within)
                swept.append((await load.sample()).get("sweeper", 0) - before)
                if swept[-1] == 0:
                    first_clean = first_clean or time.monotonic()
                    in_a_row += 1
                else:
                    first_clean, in_a_row = None, 0
    except TimeoutError:
        raise AssertionError(f"no {CLEAN_WAVES_IN_A_ROW} clean waves in a row within {within}s;"
                             f" runs swept per wave: {swept}") from None
    assert first_clean is not None
    return first_clean


async def _fault(load: Load, figures: dict[str, object], inject: Callable[[], Awaitable[None]],
                 heal: Callable[[], Awaitable[None]], *, hold: float) -> None:
    """Inject the fault under load, keep the load on for ``hold`` seconds, heal, record."""
    before = await load.sample()
    at = time.monotonic()
    await inject()
    await asyncio.sleep(hold)  # the fault lasts this long, by design
    await heal()
    figures["_healed_at"] = time.monotonic()
    try:
        await load.sink.wait_for(lambda s: s.unique >= load.seeded - WAVE, within=120)
    except TimeoutError as exc:  # how far it got, and where the runs are
        raise AssertionError(f"{exc}; wanted {load.seeded - WAVE} of {load.seeded} seeded; "
                             f"run states {await status_counts(load.pool)}") from None
    after = await load.sample()
    claimed = sum(after.values()) - sum(before.values())
    figures.update(
        recovered_seconds=round(load.sweeper_after(at), 1),
        fault_sweeper_share=round((after.get("sweeper", 0) - before.get("sweeper", 0))
                                  / max(claimed, 1), 3))


async def test_killing_the_partition_leader_under_load_loses_nothing(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, cluster: KafkaCluster
) -> None:
    async with loaded_fleet(db_pool, sink, fleet, cluster) as (load, figures):
        leaders = await partition_leaders(cluster.bootstrap, str(figures["topic"]))
        victim = max(set(leaders.values()), key=list(leaders.values()).count)
        figures["victim_led"] = sorted(p for p, n in leaders.items() if n == victim)

        async def kill() -> None:
            assert cluster.node(victim).kill() == -9

        async def restart() -> None:
            await asyncio.to_thread(cluster.restart, victim)

        await _fault(load, figures, kill, restart, hold=12.0)
    report("kafka_cluster_leader_kill_9", victim=victim, **_public(figures))


async def test_a_broker_frozen_past_the_session_timeouts_loses_nothing(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, cluster: KafkaCluster
) -> None:
    """The group coordinator's broker stops answering for 15 s: longer than the consumers'
    session (10 s) and the controller's broker session (9 s), so it is fenced, its
    partitions get new leaders and the group a new coordinator; then it thaws."""
    async with loaded_fleet(db_pool, sink, fleet, cluster) as (load, figures):
        group = str(figures["settings"]["kafka_consumer_group"])  # type: ignore[index]
        frozen = await group_coordinator(cluster.bootstrap, group)

        async def freeze() -> None:
            cluster.node(frozen).freeze()

        async def thaw() -> None:
            cluster.node(frozen).thaw()

        await _fault(load, figures, freeze, thaw, hold=15.0)
    report("kafka_cluster_coordinator_sigstop", frozen=frozen, **_public(figures))


async def test_restarting_the_active_controller_under_load_loses_nothing(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, cluster: KafkaCluster
) -> None:
    async with loaded_fleet(db_pool, sink, fleet, cluster) as (load, figures):
        controller = cluster.quorum_leader()
        assert controller is not None

        async def stop() -> None:
            await asyncio.to_thread(cluster.node(controller).stop)

        async def start() -> None:
            await asyncio.to_thread(cluster.restart, controller)

        await _fault(load, figures, stop, start, hold=3.0)
        figures["new_controller"] = cluster.quorum_leader()
    report("kafka_cluster_controller_restart", controller=controller, **_public(figures))


async def test_rebalances_as_replicas_join_and_leave_lose_nothing(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, cluster: KafkaCluster
) -> None:
    """Under load: c joins, a leaves, d joins, b leaves (SIGTERM: each leaves the group
    and releases its runs), each a rebalance of the classic consumer protocol."""
    async with loaded_fleet(db_pool, sink, fleet, cluster) as (load, figures):
        settings = figures["settings"]
        a, b = load.replicas
        at = time.monotonic()
        for joining, leaving in (("c", a), ("d", b)):
            load.replicas.append(await fleet.spawn(joining, executor_workers=32, **settings))  # type: ignore[arg-type]
            await group_stable(load.replicas)
            await load.leave(leaving)
            await group_stable(load.replicas)
        figures["_healed_at"] = time.monotonic()
        figures["rebalances_seconds"] = round(time.monotonic() - at, 1)
        figures["recovered_seconds"] = round(load.sweeper_after(at), 1)
    report("kafka_cluster_rebalances", **_public(figures))


def _public(figures: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in figures.items()
            if k not in ("settings", "topic") and not k.startswith("_")}
