"""PostgresClaimSource against real Postgres: the lease, rule 1, fairness, expired leases."""

from __future__ import annotations

import asyncio

import asyncpg

from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.domain.model import ClaimBatch, RunStatus
from cronwire.harness.seeding import seed_due_runs, seed_schedule, seed_tenant
from tests.support.secrets import secret_box

URL = "http://127.0.0.1:9/hook"


async def _schedule(pool: asyncpg.Pool, **kwargs: object):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        tenant = await seed_tenant(conn)
        return await seed_schedule(conn, tenant, URL, **kwargs)  # type: ignore[arg-type]


async def test_claim_takes_a_lease_on_due_runs_only(db_pool: asyncpg.Pool) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 5)  # type: ignore[arg-type]
    await seed_due_runs(db_pool, schedule, 3, first=100, due_seconds_ago=-60)  # type: ignore[arg-type]
    runs = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("replica-a", 10, 30)).runs
    assert len(runs) == 5
    assert {r.attempt for r in runs} == {1}
    assert all(r.target.url == URL and r.signing_secrets == (schedule.signing_secret,) for r in runs)
    rows = await db_pool.fetch(
        """SELECT status, claimed_by, attempt_count, first_attempt_at IS NOT NULL AS started,
                  extract(epoch FROM claim_expires_at - now()) AS lease_left
             FROM job_run WHERE id = ANY($1::uuid[])""",
        [r.id for r in runs],
    )
    assert {(r["status"], r["claimed_by"], r["attempt_count"], r["started"]) for r in rows} == {
        ("running", "replica-a", 1, True)
    }
    assert all(29 < r["lease_left"] <= 30 for r in rows)
    assert (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("replica-b", 10, 30)).runs == ()


async def test_claim_never_takes_more_than_the_limit(db_pool: asyncpg.Pool) -> None:
    """Rule 1 at the claim: the executor passes its idle workers as the limit."""
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 10)  # type: ignore[arg-type]
    runs = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("replica-a", 3, 30)).runs
    assert len(runs) == 3
    running = await db_pool.fetchval("SELECT count(*) FROM job_run WHERE status = 'running'")
    assert running == 3


async def test_concurrent_claims_never_share_a_run(db_pool: asyncpg.Pool) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 100)  # type: ignore[arg-type]
    source = PostgresClaimSource(db_pool, secret_box(db_pool))
    batches = await asyncio.gather(*(source.claim(f"r{i}", 30, 30) for i in range(4)))
    ids = [run.id for batch in batches for run in batch.runs]
    assert len(ids) == len(set(ids))
    owners = await db_pool.fetch("SELECT claimed_by, count(*) AS n FROM job_run "
                                 "WHERE status = 'running' GROUP BY claimed_by")
    assert sum(r["n"] for r in owners) == len(ids)


async def test_a_live_lease_is_not_reclaimed_but_an_expired_one_is(db_pool: asyncpg.Pool) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 2)  # type: ignore[arg-type]
    source = PostgresClaimSource(db_pool, secret_box(db_pool))
    first = (await source.claim("replica-a", 10, 30)).runs
    assert len(first) == 2
    assert (await source.claim("replica-b", 10, 30)).runs == ()
    expired = first[0]
    await db_pool.execute(
        "UPDATE job_run SET claim_expires_at = now() - interval '1 second' WHERE id = $1",
        expired.id,
    )
    again = (await source.claim("replica-b", 10, 30)).runs
    assert [r.id for r in again] == [expired.id]
    assert again[0].attempt == 1  # the vanished owner's request never started: not used
    assert again[0].lease_generation == expired.lease_generation + 1
    owner = await db_pool.fetchval("SELECT claimed_by FROM job_run WHERE id = $1", expired.id)
    assert owner == "replica-b"


async def test_an_expired_lease_on_the_final_attempt_fails_instead_of_redelivering(
    db_pool: asyncpg.Pool,
) -> None:
    schedule = await _schedule(
        db_pool, retry={"max_attempts": 2, "initial_backoff_seconds": 1, "max_backoff_seconds": 1}
    )
    await seed_due_runs(db_pool, schedule, 1)  # type: ignore[arg-type]
    await db_pool.execute(
        "UPDATE job_run SET status = 'running', attempt_count = 2, claimed_by = 'gone', "
        "attempt_started = true, claim_expires_at = now() - interval '1 second'"
    )
    batch = await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("replica-b", 10, 30)
    assert batch.runs == () and isinstance(batch, ClaimBatch) and batch.ended == (RunStatus.FAILED,)
    row = await db_pool.fetchrow("SELECT status, attempt_count, last_error FROM job_run")
    assert row["status"] == RunStatus.FAILED and row["attempt_count"] == 2
    assert row["last_error"].startswith("LeaseExpired")


async def test_one_tenants_backlog_does_not_starve_another(db_pool: asyncpg.Pool) -> None:
    """50,000 runs of a noisy tenant, due for a minute, and one run of a quiet tenant due
    for a second: the very first small claim already includes the quiet tenant's run."""
    noisy = await _schedule(db_pool)
    quiet = await _schedule(db_pool)
    async with db_pool.acquire() as conn:
        assert await seed_due_runs(conn, noisy, 50_000, due_seconds_ago=60) == 50_000
        await seed_due_runs(conn, quiet, 1, due_seconds_ago=1)
        await conn.execute("ANALYZE job_run")
    runs = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("replica-a", 10, 30)).runs
    assert len(runs) == 10
    assert quiet.tenant_id in {r.tenant_id for r in runs}
    assert sum(r.tenant_id == noisy.tenant_id for r in runs) == 9


async def test_tenants_take_turns_within_one_claim(db_pool: asyncpg.Pool) -> None:
    schedules = [await _schedule(db_pool) for _ in range(3)]
    for n, schedule in enumerate(schedules):
        await seed_due_runs(db_pool, schedule, 20, due_seconds_ago=30 - n)  # type: ignore[arg-type]
    runs = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("replica-a", 9, 30)).runs
    per_tenant = {s.tenant_id: sum(r.tenant_id == s.tenant_id for r in runs) for s in schedules}
    assert sorted(per_tenant.values()) == [3, 3, 3]


async def test_both_secrets_sign_while_a_rotation_is_in_progress(db_pool: asyncpg.Pool) -> None:
    schedule = await _schedule(db_pool, previous_secret="whsec_" + "A" * 32)
    await seed_due_runs(db_pool, schedule, 1)  # type: ignore[arg-type]
    [run] = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("replica-a", 1, 30)).runs
    assert run.signing_secrets == (schedule.signing_secret, "whsec_" + "A" * 32)


async def test_seconds_until_due_reads_the_earliest_runnable_run(db_pool: asyncpg.Pool) -> None:
    source = PostgresClaimSource(db_pool, secret_box(db_pool))
    assert await source.seconds_until_due() is None  # nothing runnable at all
    async with db_pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), "http://127.0.0.1:9/")
        await seed_due_runs(conn, schedule, 2, due_seconds_ago=-30)
        later = await source.seconds_until_due()
        assert later is not None and 28 < later <= 30
        await seed_due_runs(conn, schedule, 1, first=10, due_seconds_ago=5)
        overdue = await source.seconds_until_due()
        assert overdue is not None and overdue <= -4
        await conn.execute("UPDATE job_run SET status = 'succeeded'")
    assert await source.seconds_until_due() is None  # terminal runs never count
