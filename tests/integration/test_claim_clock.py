"""Every claim takes its clock as an optional last argument (NULL: Postgres's now()), and
every due and lease decision of the claim reads it: pinned, a run due tomorrow is claimed
tomorrow and not a second before, and its lease runs from the pinned instant."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
import pytest

from cronwire.adapters.postgres.sql import queries
from cronwire.harness.seeding import db_now, seed_due_run_ids, seed_schedule, seed_tenant

Q = queries("job_run")
LEASE = 30.0
SECOND = timedelta(seconds=1)


async def _run_due_tomorrow(pool: asyncpg.Pool) -> tuple[datetime, asyncpg.Record]:
    """One pending run due a day after the database's clock: only a pinned clock can
    reach it. Returns the instant it is due and its key."""
    due = await db_now(pool) + timedelta(days=1)
    async with pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), "http://127.0.0.1:9/")
        [run_id] = await seed_due_run_ids(conn, schedule, 1, due_at=due)
    key = await pool.fetchrow("SELECT id, scheduled_for FROM job_run WHERE id = $1", run_id)
    return due, key


async def _claim(pool: asyncpg.Pool, now: datetime | None, grace: float = 0.0) -> list[asyncpg.Record]:
    return await pool.fetch(Q["job_run_claim"], "owner", 10, LEASE, grace, now)


async def test_the_polling_claim_takes_a_run_at_the_pinned_instant_it_is_due(
        db_pool: asyncpg.Pool) -> None:
    due, key = await _run_due_tomorrow(db_pool)
    assert await _claim(db_pool, None) == []  # the server's clock: not due for a day
    assert await _claim(db_pool, due - SECOND) == []
    [run] = await _claim(db_pool, due)
    assert (run["id"], run["status"], run["attempt_count"]) == (key["id"], "running", 1)
    assert run["claim_expires_at"] == due + timedelta(seconds=LEASE)
    row = await db_pool.fetchrow(
        "SELECT first_attempt_at, updated_at FROM job_run WHERE id = $1", key["id"])
    assert (row["first_attempt_at"], row["updated_at"]) == (due, due)


async def test_an_expired_lease_is_reclaimed_only_once_the_pinned_clock_passes_it(
        db_pool: asyncpg.Pool) -> None:
    due, key = await _run_due_tomorrow(db_pool)
    [first] = await _claim(db_pool, due)
    expires = first["claim_expires_at"]
    assert await _claim(db_pool, expires - SECOND) == []  # the lease still holds
    [again] = await _claim(db_pool, expires + SECOND)
    assert again["id"] == key["id"]
    assert again["lease_generation"] == first["lease_generation"] + 1
    # Its request never started (the renewal did not mark it): the same attempt again.
    assert again["attempt_count"] == first["attempt_count"]
    assert again["claim_expires_at"] == expires + SECOND + timedelta(seconds=LEASE)


async def test_the_sweep_waits_its_grace_on_the_pinned_clock(db_pool: asyncpg.Pool) -> None:
    due, key = await _run_due_tomorrow(db_pool)
    grace = 5.0

    async def sweep(now: datetime) -> list[asyncpg.Record]:
        return await db_pool.fetch(Q["job_run_sweep"], "owner", 10, LEASE, grace, now)

    assert await sweep(due + timedelta(seconds=grace) - SECOND) == []
    [run] = await sweep(due + timedelta(seconds=grace))
    assert run["id"] == key["id"]
    assert run["claim_expires_at"] == due + timedelta(seconds=grace + LEASE)


async def test_the_claim_by_keys_takes_a_key_only_once_its_run_is_due_on_the_pinned_clock(
        db_pool: asyncpg.Pool) -> None:
    due, key = await _run_due_tomorrow(db_pool)

    async def claim_keys(now: datetime | None) -> list[asyncpg.Record]:
        return await db_pool.fetch(Q["job_run_claim_keys"], "owner", 1, LEASE, [key["id"]],
                                   [key["scheduled_for"]], now)

    assert await claim_keys(None) == []
    assert await claim_keys(due - SECOND) == []
    [run] = await claim_keys(due)
    assert run["id"] == key["id"]
    assert run["claim_expires_at"] == due + timedelta(seconds=LEASE)


@pytest.mark.parametrize("statement", ["job_run_claim", "job_run_sweep"])
async def test_no_pinned_clock_is_the_servers(db_pool: asyncpg.Pool, statement: str) -> None:
    async with db_pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), "http://127.0.0.1:9/")
        await seed_due_run_ids(conn, schedule, 1, due_seconds_ago=10)
        async with conn.transaction():
            now = await conn.fetchval("SELECT now()")
            [run] = await conn.fetch(Q[statement], "owner", 10, LEASE, 0.0, None)
    assert run["claim_expires_at"] == now + timedelta(seconds=LEASE)
