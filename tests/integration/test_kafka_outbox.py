"""Kafka mode's outbox on real Postgres: what a pass publishes (due, runnable, each due
tenant's oldest first, only what the broker acknowledged, only once committed), what it
leaves while this replica is backlogged (ADR 0025, ADR 0063) or to the sweeper, and runs
published again once runnable again. The broker is a recording fake where what matters is
what was sent; test_kafka_mode.py runs the outbox against real brokers."""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime
from uuid import UUID

import asyncpg

from cronwire.adapters.memory import MemoryHints
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.keyed_claims import PostgresKeyedClaims
from cronwire.adapters.postgres.outbox_store import PostgresOutboxStore
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.domain.backlog import BACKLOG_KEYS_PER_TENANT
from cronwire.harness.seeding import seed_due_run_ids, seed_due_runs
from cronwire.service.outbox_relay import OutboxRelay
from tests.support.kafka import new_schedule
from tests.support.secrets import secret_box


class _RecordingPublisher:
    """A broker that acknowledges every key and remembers what it was sent."""

    healthy = True

    def __init__(self) -> None:
        self.sent: list[tuple[UUID, object, UUID]] = []

    async def publish(self, runs):  # type: ignore[no-untyped-def]
        self.sent.extend(runs)
        return [(run_id, at) for run_id, at, _ in runs]


def _backlogged_relay(pool: asyncpg.Pool) -> tuple[
        OutboxRelay, list[tuple[UUID, object, UUID]], MemoryHints]:
    """A relay (0.2 s poll) beside a consumer whose one-key buffer is full, so backlogged,
    publishing to a recording broker: (relay, what it sent, the consumer)."""
    publisher = _RecordingPublisher()
    hints = MemoryHints(buffer_limit=1)
    hints.deliver([(uuid.uuid4(), datetime.now(UTC))])
    relay = OutboxRelay(PostgresOutboxStore(pool), publisher, hints=hints, poll_seconds=0.2)
    return relay, publisher.sent, hints


async def test_the_outbox_publishes_due_runs_only_and_marks_what_was_acknowledged(
    db_pool: asyncpg.Pool,
) -> None:
    schedule = await new_schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 4)  # type: ignore[arg-type]
    await seed_due_runs(db_pool, schedule, 2, first=100, due_seconds_ago=-60)  # type: ignore[arg-type]
    store = PostgresOutboxStore(db_pool)
    sent: list[object] = []

    async def ack_half(runs):  # type: ignore[no-untyped-def]
        sent.extend(runs)
        return [(run_id, at) for run_id, at, _ in runs[:2]]

    assert await store.publish_due(10, ack_half) == 2
    assert len(sent) == 4  # the two planned ahead were not sent: not due yet
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NOT NULL") == 2

    async def broken(_runs):  # type: ignore[no-untyped-def]
        raise RuntimeError("broker gone")

    with contextlib.suppress(RuntimeError):  # the failed send is what is under test
        await store.publish_due(10, broken)
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NOT NULL") == 2
    seconds = await store.seconds_until_unpublished_due()
    assert seconds is not None and seconds < 0


async def test_a_key_is_sent_only_once_its_run_is_committed_published_and_unlocked(
    db_pool: asyncpg.Pool,
) -> None:
    # The kafka burst measured it: the publisher used to send inside its transaction, so a
    # consumer that got a key first waited on the row's lock until the broker's ack and the
    # mark were committed (~0.2 s per 2,000-key pass), and the claim by key stalled with it.
    schedule = await new_schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 3)  # type: ignore[arg-type]
    store = PostgresOutboxStore(db_pool)
    seen: list[tuple[int, int]] = []

    async def look_from_elsewhere(runs):  # type: ignore[no-untyped-def]
        async with db_pool.acquire() as conn, conn.transaction():
            # NOWAIT: a row still locked by the publisher raises LockNotAvailableError.
            locked = await conn.fetch(
                "SELECT published_at FROM job_run WHERE id = ANY($1::uuid[]) FOR UPDATE NOWAIT",
                [run_id for run_id, _, _ in runs])
        seen.append((len(locked), sum(row["published_at"] is not None for row in locked)))
        return [(run_id, at) for run_id, at, _ in runs]

    assert await store.publish_due(10, look_from_elsewhere) == 3
    assert seen == [(3, 3)]


async def test_while_this_replicas_keys_are_backlogged_the_relay_publishes_only_fresh_runs(
    db_pool: asyncpg.Pool,
) -> None:
    # The kafka 100k burst: every key was published and marked, and most arrived after the
    # fair claim had taken the run (a mark, a message and a claim by key for nothing each).
    schedule = await new_schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 3, due_seconds_ago=30)  # type: ignore[arg-type]
    await seed_due_runs(db_pool, schedule, 2, first=100, due_seconds_ago=0.2)  # type: ignore[arg-type]
    relay, sent, hints = _backlogged_relay(db_pool)
    assert await relay.step() == 0.2 and len(sent) == 2  # the two fresh ones, then a pause
    assert await relay.step() == 0.2  # the older three wait: no spin on them
    assert len(sent) == 2
    hints.take(1)
    hints.acknowledge()  # caught up
    assert await relay.step() == 0.0 and len(sent) == 5
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NULL") == 0


async def test_while_backlogged_a_pass_publishes_each_tenants_share_of_fresh_runs(
    db_pool: asyncpg.Pool,
) -> None:
    # The kafka 100k burst, due at one instant: every run is fresh for a second, and the
    # relay published 2,000 keys a pass into the backlogged partition, most of them for
    # runs the fair claim had taken by the time their key was consumed (ADR 0063).
    burst, quiet = await new_schedule(db_pool), await new_schedule(db_pool)
    await seed_due_runs(db_pool, burst, BACKLOG_KEYS_PER_TENANT + 50,  # type: ignore[arg-type]
                        due_seconds_ago=0)
    await seed_due_runs(db_pool, quiet, 1, due_seconds_ago=0)  # type: ignore[arg-type]
    relay, sent, hints = _backlogged_relay(db_pool)
    assert await relay.step() == 0.2  # not at once: the share is per pass
    tenants = [tenant for _, _, tenant in sent]
    assert tenants.count(burst.tenant_id) == BACKLOG_KEYS_PER_TENANT
    assert tenants.count(quiet.tenant_id) == 1  # the quiet tenant's fresh run goes out now
    hints.take(1)
    hints.acknowledge()  # caught up: the rest go out at once
    assert await relay.step() == 0.0
    assert len(sent) == BACKLOG_KEYS_PER_TENANT + 1 + 50


async def test_runs_overdue_beyond_the_sweepers_grace_are_left_to_the_sweeper(
    db_pool: asyncpg.Pool,
) -> None:
    # The kafka 100k burst: keys published for runs already seconds overdue arrived after a
    # sweep had taken the run (54,000 marked, 43,000 claimed by key). Such a run is the
    # sweeper's anyway, so the relay no longer publishes it (ADR 0063).
    schedule = await new_schedule(db_pool)
    old = await seed_due_run_ids(db_pool, schedule, 3, due_seconds_ago=30)  # type: ignore[arg-type]
    await seed_due_runs(db_pool, schedule, 2,  # type: ignore[arg-type]
                        first=100, due_seconds_ago=1)
    publisher = _RecordingPublisher()
    sent = publisher.sent

    relay = OutboxRelay(PostgresOutboxStore(db_pool), publisher, sweep_grace_seconds=5,
                        poll_seconds=0.2)
    assert await relay.step() == 0.0 and len(sent) == 2  # the two a second overdue
    assert await relay.step() == 0.2  # the old three are not a reason to spin
    assert len(sent) == 2
    swept = await PostgresKeyedClaims(db_pool, secret_box(db_pool)).sweep("sweeper", 10, 30.0, 5.0)
    assert {run.id for run in swept.runs} == set(old)


async def test_the_outbox_publishes_each_due_tenants_oldest_keys_in_turn(
    db_pool: asyncpg.Pool,
) -> None:
    # The chaos fairness fault found it: publishing oldest-first, a 3,000-run burst due a
    # minute ago went out before any key of a tenant due a second ago, so in kafka mode the
    # small tenants waited for the whole burst's publication (about 2 s at 50,000 runs).
    noisy = await new_schedule(db_pool)
    await seed_due_runs(db_pool, noisy, 3000, due_seconds_ago=60)  # type: ignore[arg-type]
    quiet = [await new_schedule(db_pool) for _ in range(3)]
    for schedule in quiet:
        await seed_due_runs(db_pool, schedule, 2)  # type: ignore[arg-type]
    store = PostgresOutboxStore(db_pool)
    batches: list[list[UUID]] = []

    async def ack_all(runs):  # type: ignore[no-untyped-def]
        batches.append([tenant_id for _, _, tenant_id in runs])
        return [(run_id, at) for run_id, at, _ in runs]

    # Four tenants due: each may lock up to 2 x 100 / 4 = 50 keys of a pass.
    assert await store.publish_due(100, ack_all) == 56
    first = batches[0]
    assert all(first.count(s.tenant_id) == 2 for s in quiet)  # both of each quiet tenant's
    assert first.count(noisy.tenant_id) == 50
    while await store.publish_due(500, ack_all):  # bounded: 3,006 keys in all
        pass
    assert sum(len(batch) for batch in batches) == 3006
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NULL") == 0
    assert await store.seconds_until_unpublished_due() is None
    await seed_due_runs(db_pool, quiet[0], 1, first=500, due_seconds_ago=-30)  # type: ignore[arg-type]
    seconds = await store.seconds_until_unpublished_due()
    assert seconds is not None and 25 < seconds <= 30


async def test_a_released_or_retried_run_is_published_again(db_pool: asyncpg.Pool) -> None:
    schedule = await new_schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 2)  # type: ignore[arg-type]
    await db_pool.execute("UPDATE job_run SET published_at = now()")
    runs = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("a", 2, 30)).runs
    released = await PostgresRunStore(db_pool).release("a", [
        (r.id, r.scheduled_for, r.lease_generation) for r in runs])
    assert released == 2
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NULL") == 2
