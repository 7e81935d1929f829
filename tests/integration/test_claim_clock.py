"""Every claim takes its clock as an optional last argument (NULL: Postgres's now()), and
every due and lease decision of the claim reads it: pinned, a run due tomorrow is claimed
tomorrow and not a second before, its lease runs from the pinned instant, and a flow-control
key's tokens refill on the pinned clock."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
import pytest

from cronwire.adapters.postgres.sql import queries
from cronwire.harness.seeding import (
    db_now,
    seed_due_run_ids,
    seed_flow_control,
    seed_schedule,
    seed_tenant,
)

Q = queries("job_run")
LEASE = 30.0
SECOND = timedelta(seconds=1)


async def _runs_due_tomorrow(pool: asyncpg.Pool, count: int = 1, **flow: float
                             ) -> tuple[datetime, list[asyncpg.Record]]:
    """``count`` pending runs due a day after the database's clock (only a pinned clock can
    reach them), under a flow-control key with the ``flow`` limits if any. Returns the
    instant they are due and their keys."""
    due = await db_now(pool) + timedelta(days=1)
    async with pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), "http://127.0.0.1:9/")
        if flow:
            await seed_flow_control(conn, schedule, "k", **flow)  # type: ignore[arg-type]
        ids = await seed_due_run_ids(conn, schedule, count, due_at=due)
    keys = await pool.fetch("SELECT id, scheduled_for FROM job_run WHERE id = ANY($1::uuid[])",
                            ids)
    return due, list(keys)


async def _run_due_tomorrow(pool: asyncpg.Pool) -> tuple[datetime, asyncpg.Record]:
    due, [key] = await _runs_due_tomorrow(pool)
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


async def test_a_keys_tokens_refill_on_the_pinned_clock(db_pool: asyncpg.Pool) -> None:
    # One token a second, a bucket of one: the claim at the due instant spends it, half a
    # second later none has come back, a second later one has. The admission and the
    # claim's count of what it spent both read the pinned clock.
    due, _keys = await _runs_due_tomorrow(db_pool, 3, rate_per_second=1.0, burst=1)
    assert len(await _claim(db_pool, due)) == 1
    assert await _claim(db_pool, due + SECOND / 2) == []
    assert len(await _claim(db_pool, due + SECOND)) == 1
    row = await db_pool.fetchrow("SELECT tokens, tokens_at FROM flow_control WHERE key = 'k'")
    assert (row["tokens"], row["tokens_at"]) == (0, due + SECOND)


@pytest.mark.parametrize("statement", ["job_run_claim", "job_run_sweep"])
async def test_no_pinned_clock_is_the_servers(db_pool: asyncpg.Pool, statement: str) -> None:
    async with db_pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), "http://127.0.0.1:9/")
        await seed_due_run_ids(conn, schedule, 1, due_seconds_ago=10)
        async with conn.transaction():
            now = await conn.fetchval("SELECT now()")
            [run] = await conn.fetch(Q[statement], "owner", 10, LEASE, 0.0, None)
    assert run["claim_expires_at"] == now + timedelta(seconds=LEASE)
