"""The sampler behind ``--statements``' wait lines (loadtest/waits.sample_waits) against a
real Postgres: it sees a statement with what it waits for, and a lost connection ends the
sampling with what was seen instead of failing the load test."""

from __future__ import annotations

import asyncio

import asyncpg

from cronwire.loadtest.waits import ON_CPU, sample_waits

SLEEP = "SELECT pg_sleep(0.4)"


async def _sampler_pid(conn: asyncpg.Connection) -> int | None:
    pid: int | None = await conn.fetchval(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND query LIKE '%wait_event_type, wait_event%' AND pid <> pg_backend_pid()"
        " LIMIT 1")
    return pid


async def test_a_waiting_statement_is_seen_and_a_lost_connection_ends_the_sampling(
        database_url: str) -> None:
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_waits(database_url, stop))
    other = await asyncpg.connect(database_url)
    try:
        await other.execute(SLEEP)  # 0.4 s active, waiting on its timer, ~40 samples
        for _ in range(100):  # the sampler's backend, found from its own statement
            pid = await _sampler_pid(other)
            if pid is not None:
                break
            await asyncio.sleep(0.02)
        assert pid is not None
        await other.execute("SELECT pg_terminate_backend($1)", pid)
        samples = await asyncio.wait_for(sampler, 10)  # ended by itself: stop is not set
    finally:
        stop.set()
        await other.close()
    assert samples.taken >= 10
    sleeping = {wait: n for (query, wait), n in samples.seen.items() if query == SLEEP}
    assert sleeping.get("Timeout:PgSleep", 0) >= 5, samples.seen
    assert sleeping.get(ON_CPU, 0) <= sleeping["Timeout:PgSleep"]
