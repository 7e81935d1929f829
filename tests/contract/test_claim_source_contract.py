"""The ClaimSource contract, against both sources: the polling one and kafka mode's hybrid
(real Postgres, real broker). Kafka mode's claims arrive through published keys, so each
claim here first lets the outbox publish and the consumer receive (``ready``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg
import pytest

from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.domain.model import ClaimedRun, RunStatus
from cronwire.ports import ClaimSource
from tests.support.kafka import kafka_mode
from tests.support.runs import seed_due_runs, seed_schedule, seed_tenant

URL = "http://127.0.0.1:9/hook"


@dataclass
class Contract:
    source: ClaimSource
    ready: Callable[[], Awaitable[object]]  # make due runs claimable through this source
    labels: frozenset[str]

    async def claim(self, owner: str, limit: int, lease: float = 30) -> Sequence[ClaimedRun]:
        await self.ready()
        return await self.source.claim(owner, limit, lease)


async def _nothing() -> None:
    return None


@pytest.fixture(params=["postgres", "kafka"])
async def contract(
    request: pytest.FixtureRequest, db_pool: asyncpg.Pool
) -> AsyncIterator[Contract]:
    if request.param == "postgres":
        yield Contract(PostgresClaimSource(db_pool), _nothing, frozenset({"postgres"}))
        return
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    # Sweep on every claim: expired leases are the sweeper's in kafka mode.
    async with kafka_mode(db_pool, bootstrap, sweep_seconds=0.0) as mode:
        yield Contract(mode.source, mode.settle, frozenset({"kafka", "sweeper"}))


async def _schedule(pool: asyncpg.Pool, **kwargs: object):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        tenant = await seed_tenant(conn)
        return await seed_schedule(conn, tenant, URL, **kwargs)  # type: ignore[arg-type]


async def test_claim_takes_a_lease_on_due_runs_only(
    contract: Contract, db_pool: asyncpg.Pool
) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 5)  # type: ignore[arg-type]
    await seed_due_runs(db_pool, schedule, 3, first=100, due_seconds_ago=-60)  # type: ignore[arg-type]
    runs = await contract.claim("replica-a", 10)
    assert len(runs) == 5 and {r.attempt for r in runs} == {1}
    assert contract.source.name in contract.labels
    assert all(r.target.url == URL and r.signing_secrets == (schedule.signing_secret,) for r in runs)
    rows = await db_pool.fetch(
        "SELECT status, claimed_by, attempt_count, extract(epoch FROM claim_expires_at - now()) "
        "AS lease_left FROM job_run WHERE id = ANY($1::uuid[])", [r.id for r in runs])
    assert {(r["status"], r["claimed_by"], r["attempt_count"]) for r in rows} == {
        ("running", "replica-a", 1)}
    assert all(28 < r["lease_left"] <= 30 for r in rows)
    assert await contract.claim("replica-b", 10) == []


async def test_claim_never_takes_more_than_the_limit(
    contract: Contract, db_pool: asyncpg.Pool
) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 10)  # type: ignore[arg-type]
    assert len(await contract.claim("replica-a", 3)) == 3
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE status = 'running'") == 3


async def test_concurrent_claims_never_share_a_run(
    contract: Contract, db_pool: asyncpg.Pool
) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 100)  # type: ignore[arg-type]
    await contract.ready()
    batches = await asyncio.gather(
        *(contract.source.claim(f"r{i}", 30, 30) for i in range(4)))
    ids = [run.id for batch in batches for run in batch]
    assert len(ids) == len(set(ids))
    running = await db_pool.fetchval("SELECT count(*) FROM job_run WHERE status = 'running'")
    assert running == len(ids)


async def test_a_live_lease_is_not_reclaimed_but_an_expired_one_is(
    contract: Contract, db_pool: asyncpg.Pool
) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 2)  # type: ignore[arg-type]
    first = await contract.claim("replica-a", 10)
    assert len(first) == 2
    assert await contract.claim("replica-b", 10) == []
    expired = first[0]
    await db_pool.execute(
        "UPDATE job_run SET claim_expires_at = now() - interval '1 second' WHERE id = $1",
        expired.id)
    again = await contract.claim("replica-b", 10)
    assert [r.id for r in again] == [expired.id]
    assert again[0].attempt == 1  # the vanished owner's request never started: not used
    assert again[0].lease_generation == expired.lease_generation + 1
    assert await db_pool.fetchval(
        "SELECT claimed_by FROM job_run WHERE id = $1", expired.id) == "replica-b"


async def test_an_expired_lease_on_the_final_attempt_fails_instead_of_redelivering(
    contract: Contract, db_pool: asyncpg.Pool
) -> None:
    schedule = await _schedule(
        db_pool, retry={"max_attempts": 2, "initial_backoff_seconds": 1, "max_backoff_seconds": 1})
    await seed_due_runs(db_pool, schedule, 1)  # type: ignore[arg-type]
    await db_pool.execute(
        "UPDATE job_run SET status = 'running', attempt_count = 2, claimed_by = 'gone', "
        "attempt_started = true, claim_expires_at = now() - interval '1 second'")
    assert await contract.claim("replica-b", 10) == []
    row = await db_pool.fetchrow("SELECT status, attempt_count, last_error FROM job_run")
    assert row["status"] == RunStatus.FAILED and row["attempt_count"] == 2
    assert row["last_error"].startswith("LeaseExpired")


async def test_both_secrets_sign_while_a_rotation_is_in_progress(
    contract: Contract, db_pool: asyncpg.Pool
) -> None:
    schedule = await _schedule(db_pool, previous_secret="whsec_" + "A" * 32)
    await seed_due_runs(db_pool, schedule, 1)  # type: ignore[arg-type]
    [run] = await contract.claim("replica-a", 1)
    assert run.signing_secrets == (schedule.signing_secret, "whsec_" + "A" * 32)


async def test_an_idle_wait_for_work_returns_within_its_bound(contract: Contract) -> None:
    async with asyncio.timeout(5):
        await contract.source.wait_for_work(0.2)
