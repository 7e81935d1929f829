"""Flow control and the overlap gate in one claim, against real Postgres (ADRs 0033, 0040).

A run its key holds back is still an occurrence of its schedule: its overlap policy applies
to it as it would without flow control (a later occurrence of a schedule whose run is
going is skipped, waits or replaces it), so a full key never turns `skip` or `buffer_one`
into an unbounded backlog. A held run that would start keeps its schedule's gate: it is
the next to start, and waits for a slot without taking the tenant's share meanwhile."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.keyed_claims import PostgresKeyedClaims
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.domain.model import RunStatus
from cronwire.harness.seeding import (
    SeededSchedule,
    seed_due_run_ids,
    seed_due_runs,
    seed_flow_control,
    seed_schedule,
    seed_tenant,
)
from tests.support.resolutions import resolution
from tests.support.secrets import secret_box

URL = "http://127.0.0.1:9/hook"
KEY = "billing-api"


async def _gated(pool: asyncpg.Pool, policy: str, tenant: uuid.UUID | None = None,
                 max_concurrency: int = 1) -> SeededSchedule:
    """A schedule under ``policy`` whose key admits ``max_concurrency`` at once."""
    schedule = await seed_schedule(pool, tenant or await seed_tenant(pool), URL)
    await seed_flow_control(pool, schedule, KEY, max_concurrency=max_concurrency)
    await pool.execute("UPDATE schedule SET overlap_policy = $2 WHERE id = $1",
                       schedule.id, policy)
    return schedule


async def _occurrences(pool: asyncpg.Pool, schedule: SeededSchedule, count: int,
                       first: int = 0) -> list[uuid.UUID]:
    """``count`` due occurrences of ``schedule`` planned under its policy, in occurrence
    order and due in that order (as the planner writes them: fire_after = scheduled_for)."""
    ids: list[uuid.UUID] = []
    for n in range(count):
        ids += await seed_due_run_ids(pool, schedule, 1, first=first + n,
                                      due_seconds_ago=10.0 - n)
    await pool.execute("UPDATE job_run j SET overlap_policy = s.overlap_policy FROM schedule s "
                       "WHERE s.id = j.schedule_id AND j.id = ANY($1::uuid[])", ids)
    return ids


async def _states(pool: asyncpg.Pool, ids: list[uuid.UUID]) -> list[str]:
    """Each run's status, with `waiting` for a pending run the gate rested."""
    rows = await pool.fetch(
        "SELECT id, CASE WHEN status = 'pending' AND fire_after > now() THEN 'waiting' "
        "ELSE status END AS state FROM job_run WHERE id = ANY($1::uuid[])", ids)
    state = {row["id"]: row["state"] for row in rows}
    return [state[i] for i in ids]


@pytest.mark.parametrize(("policy", "after_one_claim"), [
    ("skip", ["running", "skipped", "skipped", "skipped"]),
    ("buffer_one", ["running", "waiting", "skipped", "skipped"]),
    ("buffer_all", ["running", "waiting", "waiting", "waiting"]),
])
async def test_occurrences_due_at_once_meet_their_policy_though_the_key_admits_one(
        db_pool: asyncpg.Pool, policy: str, after_one_claim: list[str]) -> None:
    schedule = await _gated(db_pool, policy)
    ids = await _occurrences(db_pool, schedule, 4)
    assert len((await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("a", 10, 30)).runs) == 1
    assert await _states(db_pool, ids) == after_one_claim


async def test_cancel_other_starts_the_newest_once_its_key_admits_it(
        db_pool: asyncpg.Pool) -> None:
    schedule = await _gated(db_pool, "cancel_other")
    ids = await _occurrences(db_pool, schedule, 4)
    source = PostgresClaimSource(db_pool, secret_box(db_pool))
    await source.claim("a", 10, 30)
    states = await _states(db_pool, ids)
    assert states[:3] == ["cancelled"] * 3 and states[3] in ("running", "pending")
    if states[3] == "pending":  # it holds the gate, and the key's slot is free: next claim
        [newest] = (await source.claim("a", 10, 30)).runs
        assert newest.id == ids[3]
    assert await _states(db_pool, ids) == ["cancelled"] * 3 + ["running"]


async def test_an_occurrence_arriving_while_its_schedule_runs_is_skipped_with_its_key_full(
        db_pool: asyncpg.Pool) -> None:
    schedule = await _gated(db_pool, "skip")
    source = PostgresClaimSource(db_pool, secret_box(db_pool))
    [first] = await _occurrences(db_pool, schedule, 1)
    assert [r.id for r in (await source.claim("a", 10, 30)).runs] == [first]
    later = await _occurrences(db_pool, schedule, 2, first=10)  # the key is full now
    assert (await source.claim("a", 10, 30)).runs == ()
    assert await _states(db_pool, later) == ["skipped", "skipped"]


async def test_a_held_run_keeps_its_schedules_gate_and_not_the_tenants_share(
        db_pool: asyncpg.Pool) -> None:
    # Another schedule's run fills the key; this schedule's first occurrence would start
    # but has no slot: it stays pending and holds the gate, so a later occurrence is
    # skipped, and while its key is full it is passed over like any held run.
    tenant = await seed_tenant(db_pool)
    filler = await _gated(db_pool, "allow", tenant)
    await seed_due_runs(db_pool, filler, 1, due_seconds_ago=30.0)
    source, store = PostgresClaimSource(db_pool, secret_box(db_pool)), PostgresRunStore(db_pool)
    [filling] = (await source.claim("a", 10, 30)).runs
    schedule = await _gated(db_pool, "skip", tenant)
    [held] = await _occurrences(db_pool, schedule, 1)
    assert (await source.claim("a", 10, 30)).runs == ()
    assert await _states(db_pool, [held]) == ["pending"]
    assert await db_pool.fetchval("SELECT overlap_run FROM schedule WHERE id = $1",
                                  schedule.id) == held
    [later] = await _occurrences(db_pool, schedule, 1, first=10)
    assert (await source.claim("a", 10, 30)).runs == ()
    assert await _states(db_pool, [held, later]) == ["pending", "skipped"]
    plain = await seed_schedule(db_pool, tenant, URL)  # no key: claimable beside the held
    await seed_due_runs(db_pool, plain, 1, first=20, due_seconds_ago=0.5)
    runs = (await source.claim("a", 1, 30)).runs  # a share of one run: not the held one
    assert [r.schedule_id for r in runs] == [plain.id]
    await store.resolve("a", [resolution(filling, RunStatus.SUCCEEDED)])
    assert [r.id for r in (await source.claim("a", 10, 30)).runs] == [held]


async def test_kafka_modes_claim_of_keys_applies_the_policy_to_runs_it_does_not_admit(
        db_pool: asyncpg.Pool) -> None:
    schedule = await _gated(db_pool, "skip")
    ids = await _occurrences(db_pool, schedule, 3)
    times = dict(await db_pool.fetch("SELECT id, scheduled_for FROM job_run "
                                     "WHERE id = ANY($1::uuid[])", ids))
    batch = await PostgresKeyedClaims(db_pool, secret_box(db_pool)).claim_keys("k", [(i, times[i]) for i in ids], 30)
    assert [r.id for r in batch.runs] == ids[:1] and batch.held == 0  # the others ended
    assert await _states(db_pool, ids) == ["running", "skipped", "skipped"]
