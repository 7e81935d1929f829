"""Kafka mode with real ``cronwire serve`` processes on real brokers — tansu and a 3-node
Apache Kafka cluster (replication factor 3, min.insync.replicas 2): kill -9 and a replica
joining mid-run, a broker restart (tansu and one Apache Kafka node), a rolling flip of the
fleet between modes, and the sweeper's share in a healthy fleet.

Sizes are small in CI; ``CRONWIRE_FULL=1`` runs the issue's full sizes. Each test gets its
own topic and consumer group. Figures are printed (``pytest -s``) for the closing note.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import asyncpg
import pytest

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.harness.seeding import (
    seed_due_run_ids,
    seed_schedule,
    seed_tenant,
    status_counts,
)
from cronwire.harness.sink import Reply, Sink, always
from tests.support.brokers import (
    APACHE_CLUSTER,
    TANSU,
    StandaloneKafka,
    bootstrap_of,
    broker_params,
)
from tests.support.kafka_fleet import (
    claims_by_source,
    group_events,
    group_stable,
    kafka_settings,
    new_topic,
    readyz,
    report,
    seed,
    settled,
    until,
)
from tests.support.replicas import ReplicaSet

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
FULL = os.environ.get("CRONWIRE_FULL") == "1"
SWEEP_GRACE_SECONDS = 5.0  # SCHEDULER_KAFKA_SWEEP_GRACE_SECONDS's default


@pytest.fixture(params=broker_params(TANSU, APACHE_CLUSTER))
def kafka_bootstrap(request: pytest.FixtureRequest) -> str:
    """This module's fleets run on tansu and on the 3-node cluster (a test added here that
    takes ``kafka_bootstrap`` runs on both)."""
    return bootstrap_of(request, request.param)


async def test_a_healthy_kafka_fleet_claims_by_message_and_the_sweeper_stays_small(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, tansu_bootstrap: str
) -> None:
    """Runs fall due in waves the fleet keeps up with: messages carry the claims, and the
    sweeper (runs overdue by the grace that no message delivered) takes almost nothing.
    On tansu; on the 3-node cluster every test of test_kafka_cluster_faults.py measures
    the same share once the cluster is whole."""
    kafka_bootstrap = tansu_bootstrap
    waves, wave = (40, 300) if FULL else (12, 240)
    runs = waves * wave
    topic = new_topic()
    # The sweeper takes a run no message delivered within its grace. Inside the whole suite
    # on two cores a starved consumer once read a wave later than the default 5 s grace
    # (158 of 2,880 runs, 5.5%; another run 10.4%): the sweeper did its job, and the share
    # measured the machine, not the claim path. The reduced run gives messages 15 s, so a
    # share near 100% still says messages carry nothing; full size keeps the default.
    grace = {} if FULL else {"kafka_sweep_grace_seconds": 15.0}
    replicas = [await fleet.spawn(name, executor_workers=64,
                                  **kafka_settings(kafka_bootstrap, topic, **grace))
                for name in ("a", "b", "c")]
    await group_stable(replicas)
    for n in range(waves):
        await seed(db_pool, sink.url, wave, tenants=12, first=n * wave)
        await sink.wait_for(lambda s, done=(n + 1) * wave: s.unique >= done - wave, within=60)
    await sink.wait_for(lambda s: s.unique == runs, within=120)
    await settled(db_pool, within=30)
    assert await status_counts(db_pool) == {"succeeded": runs}
    assert sink.duplicates == 0
    claims = await claims_by_source(replicas)
    assert claims.get("postgres", 0) == 0
    assert sum(claims.values()) == runs
    sweeper_share = claims.get("sweeper", 0) / runs
    # Alone, the share is 0 (three runs, also beside three busy loops). Inside the whole
    # suite it measures how starved the machine is: with a 15 s grace, 11.5% once (2,880
    # runs, load average 15-19 with other work on the box). Messages that carried nothing
    # would show as a share near 100%; the bound says "most claims came by message".
    assert sweeper_share <= (0.05 if FULL else 0.25), claims
    for replica in replicas:
        status, body = await readyz(replica)
        assert status == 200 and body["checks"]["kafka"] is True
        assert await replica.stop() == 0
    report("kafka_healthy_fleet", runs=runs, claims=claims, sweeper_share=sweeper_share,
            duplicates=sink.duplicates)


async def test_one_tenant_beyond_one_replicas_slots_is_helped_a_second_late(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, tansu_bootstrap: str
) -> None:
    """ADR 0063. One tenant's keys all go to one partition, so one replica claims them by
    key: 4 slots against a 0.2 s receiver, 20 runs/s, while the tenant's runs fall due at
    40 a second. The owner says it overflows; the other two replicas' sweeps then take its
    runs a second overdue. Without the signal they waited for the sweeper's 5 s grace and
    about half the runs were delivered later than that."""
    sink.behaviour = always(Reply(delay=0.2))
    topic = new_topic()
    replicas = [await fleet.spawn(name, executor_workers=4,
                                  **kafka_settings(tansu_bootstrap, topic))
                for name in ("a", "b", "c")]
    await group_stable(replicas)
    async with db_pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn, "busy"), sink.url)
    waves, wave = (40, 20) if FULL else (16, 20)  # a wave every 0.5 s: 40 runs/s
    runs = waves * wave
    fell_due: dict[str, float] = {}
    for n in range(waves):
        ids = await seed_due_run_ids(db_pool, schedule, wave, first=n * wave,
                                     due_seconds_ago=0)
        fell_due.update(dict.fromkeys(map(str, ids), time.monotonic()))
        await asyncio.sleep(0.5)
    await sink.wait_for(lambda s: s.unique == runs, within=120)
    await settled(db_pool, within=30)
    assert await status_counts(db_pool) == {"succeeded": runs}
    first_arrival: dict[str, float] = {}
    for arrival in sink.arrivals:
        first_arrival.setdefault(arrival.run_id, arrival.arrived_at)
    lags = sorted(first_arrival[run] - due for run, due in fell_due.items())
    late_share = sum(lag > SWEEP_GRACE_SECONDS for lag in lags) / runs
    claims = await claims_by_source(replicas)
    report("kafka_one_tenant_beyond_one_replica", runs=runs, claims=claims,
           lag_p50=round(lags[runs // 2], 2), lag_p90=round(lags[runs * 9 // 10], 2),
           late_share=round(late_share, 3), duplicates=sink.duplicates)
    assert claims.get("sweeper", 0) > 0, claims  # the other replicas helped
    assert late_share <= 0.05, (late_share, lags[runs // 2], lags[runs * 9 // 10],
                                group_events(replicas))
    for replica in replicas:
        assert await replica.stop() == 0


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
    await group_stable([a, b])
    await seed(db_pool, sink.url, runs, tenants=12)
    await sink.wait_for(lambda s: s.unique >= runs // 4, within=60)
    a.kill()
    assert await a.wait() == -9
    orphaned = await db_pool.fetchval(
        "SELECT count(*) FROM job_run WHERE status = 'running' AND claimed_by = 'a'")
    c = await fleet.spawn("c", delivery_timeout=1.0, executor_workers=32, **settings)
    await sink.wait_for(lambda s: s.unique == runs, within=120)
    await settled(db_pool, within=30)
    assert await status_counts(db_pool) == {"succeeded": runs}
    assert sink.duplicates <= orphaned
    claims = await claims_by_source([b, c])
    assert claims.get("kafka", 0) > 0 and claims.get("postgres", 0) == 0
    assert await b.stop() == 0 and await c.stop() == 0
    report("kafka_kill_9_and_join", runs=runs, orphaned_leases=orphaned, lost=0,
            duplicates=sink.duplicates, survivor_claims=claims)


async def test_a_broker_restart_mid_run_loses_and_duplicates_nothing(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet,
    own_kafka: EmbeddedBroker | StandaloneKafka,
) -> None:
    """tansu keeps everything in memory: the restart loses the topic, every key in it and
    the committed offsets. Apache Kafka keeps them on disk. Either way the replicas degrade
    to the sweeper (readyz names kafka), then (re)create the topic if it is gone and
    resume kafka claims without a restart."""
    runs = 6_000 if FULL else 1_500
    sink.behaviour = always(Reply(delay=0.01))
    broker = own_kafka
    await asyncio.to_thread(broker.start)
    topic = new_topic()
    settings = kafka_settings(broker.bootstrap, topic)
    replicas = [await fleet.spawn(n, executor_workers=16, **settings) for n in ("a", "b")]
    await group_stable(replicas)
    await seed(db_pool, sink.url, runs // 2, tenants=6)
    await sink.wait_for(lambda s: s.unique >= runs // 8, within=60)
    # In a thread: the sink shares this event loop, and tansu takes seconds to stop.
    await asyncio.to_thread(broker.stop)

    async def degraded() -> bool:
        answers = [await readyz(r) for r in replicas]
        return all(s == 503 and b["checks"].get("kafka") is False for s, b in answers)

    await until(degraded, within=30)
    gauges = [(await r.metrics()).get("scheduler_kafka_broker_up") for r in replicas]
    assert gauges == [0, 0]
    await seed(db_pool, sink.url, runs // 2, tenants=6, first=100_000)
    await asyncio.to_thread(broker.start)
    restarted = time.monotonic()

    async def recovered() -> bool:
        return [(await readyz(r))[0] for r in replicas] == [200, 200]

    await until(recovered, within=60)
    await sink.wait_for(lambda s: s.unique == runs, within=120)
    await settled(db_pool, within=30)
    assert await status_counts(db_pool) == {"succeeded": runs}
    assert sink.duplicates == 0
    claims = await claims_by_source(replicas)
    assert claims.get("sweeper", 0) > 0
    # Kafka claims resume after the restart (tansu: from the re-created topic; Apache Kafka:
    # once the group has re-formed on the restarted coordinator, which takes longer). Small
    # waves until one is claimed by message: the sweeper takes a wave nobody consumes.
    before, extra = claims.get("kafka", 0), 0
    async with asyncio.timeout(90):
        while (await claims_by_source(replicas)).get("kafka", 0) <= before:
            await seed(db_pool, sink.url, 12, tenants=6, first=200_000 + extra)
            extra += 12
            await asyncio.sleep(1.0)
    resumed_after = time.monotonic() - restarted
    await sink.wait_for(lambda s: s.unique == runs + extra, within=60)
    after = await claims_by_source(replicas)
    for replica in replicas:
        assert await replica.stop() == 0
    report(f"kafka_broker_restart[{type(broker).__name__}]", runs=runs + extra, lost=0,
            duplicates=sink.duplicates, claims=after, kafka_resumed_seconds=round(resumed_after, 1))


# Reduced, the flip runs on the 3-node Apache Kafka cluster only (the broker production
# runs; its twin on tansu took 60-90 s of the serial fleet group's critical path for the
# same counts); CRONWIRE_FULL=1 runs both.
@pytest.mark.parametrize("kafka_bootstrap", broker_params(
    *((TANSU, APACHE_CLUSTER) if FULL else (APACHE_CLUSTER,))), indirect=True)
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
            await seed(db_pool, sink.url, wave, tenants=4, first=seeded)
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
    await settled(db_pool, within=30)
    assert await status_counts(db_pool) == {"succeeded": seeded}
    assert sink.duplicates == 0
    for replica in current.values():
        assert await replica.stop() == 0
    report("rolling_flip", runs=seeded, lost=0, duplicates=sink.duplicates)


async def test_serve_in_kafka_mode_starts_the_embedded_broker_by_default(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, tmp_path: Path
) -> None:
    replica = await fleet.spawn("solo", claim_source="kafka", home=str(tmp_path / "home"))

    async def ready() -> bool:
        status, body = await readyz(replica)
        return status == 200 and body["checks"].get("kafka") is True

    await until(ready, within=60)
    assert "embedded kafka broker (no SCHEDULER_KAFKA_BOOTSTRAP_SERVERS)" in replica.log()
    await seed(db_pool, sink.url, 20, tenants=2)
    await sink.wait_for(lambda s: s.unique == 20, within=60)
    assert await replica.stop() == 0
    assert "embedded kafka broker stopped" in replica.log()
