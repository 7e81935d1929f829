"""The run history on a hot standby (SCHEDULER_DATABASE_READ_URL) against a real pair:
the standby serves while its data is at most SCHEDULER_READ_MAX_LAG_SECONDS old, the
primary when it lags further, is down or has not replayed a run yet, and nothing is ever
written through the read side (ADR 0039). The last test goes through `cronwire serve`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from cronwire.adapters.embedded.postgres_pair import EmbeddedPostgresPair
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.run_history import PostgresRunHistory
from cronwire.adapters.postgres.schedule_stats import PostgresStatsReader
from cronwire.adapters.postgres.standby_freshness import StandbyFreshness
from cronwire.adapters.postgres.standby_history import StandbyRunHistory, StandbyStatsReader
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.domain.history import RunQuery
from cronwire.harness.seeding import SeededSchedule, seed_due_run_ids, seed_schedule, seed_tenant
from tests.support.pg_ha import ha_database, single_host
from tests.support.polling import wait_until
from tests.support.replicas import ReplicaSet

pytestmark = pytest.mark.slow
MAX_LAG = 2.0


@dataclass
class Reads:
    history: StandbyRunHistory
    stats: StandbyStatsReader
    primary: asyncpg.Pool
    standby: asyncpg.Pool  # a plain connection pool on the standby, for the test's own use
    schedule: SeededSchedule
    servers: list[str] = field(default_factory=list)

    async def ids(self) -> set[uuid.UUID]:
        page = await self.history.list(self.schedule.tenant_id, RunQuery(limit=500))
        return {run.id for run in page}

    async def add_run(self, first: int) -> uuid.UUID:
        [run_id] = await seed_due_run_ids(self.primary, self.schedule, 1, first=first)
        return run_id


@pytest.fixture
async def reads(pg_pair: EmbeddedPostgresPair) -> AsyncIterator[Reads]:
    dsn = await ha_database(pg_pair)
    standby_url = single_host(pg_pair, dsn, standby=True)
    primary = await create_pool(dsn, 4)
    read_pool = await create_pool(standby_url, 4, read_only=True)
    standby = await asyncpg.create_pool(standby_url, min_size=1, max_size=2)
    try:
        tenant = await seed_tenant(primary)
        schedule = await seed_schedule(primary, tenant, "http://127.0.0.1:9/hook")
        servers: list[str] = []
        freshness = StandbyFreshness(primary, read_pool, MAX_LAG)
        history = StandbyRunHistory(
            PostgresRunHistory(primary), PostgresRunHistory(read_pool), freshness,
            on_read=servers.append)
        stats = StandbyStatsReader(
            PostgresStatsReader(primary), PostgresStatsReader(read_pool), freshness,
            on_read=servers.append)
        yield Reads(history, stats, primary, standby, schedule, servers)
    finally:
        await standby.close()
        await read_pool.close()
        await primary.close()


async def _standby_serves(reads: Reads, run_id: uuid.UUID) -> None:
    async def served() -> bool:
        reads.servers.clear()
        return run_id in await reads.ids() and reads.servers == ["standby"]

    await wait_until(served, within=20, every=0.05)


async def test_a_fresh_standby_serves_the_history(reads: Reads) -> None:
    first = await reads.add_run(0)
    await _standby_serves(reads, first)
    detail = await reads.history.get(reads.schedule.tenant_id, first)
    assert detail.run.id == first and reads.servers[-1] == "standby"


async def test_a_fresh_standby_serves_the_stats_and_a_stale_one_leaves_them_to_the_primary(
    reads: Reads,
) -> None:
    await _standby_serves(reads, await reads.add_run(0))
    tenant, schedule = reads.schedule.tenant_id, reads.schedule.id
    on_standby = await reads.stats.schedule_stats(tenant, schedule, "24h", 86_400)
    assert on_standby.occurrences == 1 and reads.servers[-1] == "standby"
    await reads.standby.execute("SELECT pg_wal_replay_pause()")
    try:
        await reads.add_run(1)

        async def primary_counts_both() -> bool:
            found = await reads.stats.schedule_stats(tenant, schedule, "24h", 86_400)
            return found.occurrences == 2 and reads.servers[-1] == "primary"

        await wait_until(primary_counts_both, within=4 * MAX_LAG + 10, every=0.1)
    finally:
        await reads.standby.execute("SELECT pg_wal_replay_resume()")


async def test_a_standby_further_behind_than_the_bound_is_skipped(reads: Reads) -> None:
    """Replay paused on the standby: its reads are stale, but never by more than the
    bound. A read that starts more than MAX_LAG after a run was committed sees the run,
    whichever server answers; before that the standby may answer without it."""
    await _standby_serves(reads, await reads.add_run(0))
    await reads.standby.execute("SELECT pg_wal_replay_pause()")
    committed = time.monotonic()
    late = await reads.add_run(1)
    seen: list[tuple[float, str, bool]] = []
    while time.monotonic() < committed + 2 * MAX_LAG + 1:
        started = time.monotonic()
        reads.servers.clear()
        has_it = late in await reads.ids()
        seen.append((started - committed, reads.servers[-1], has_it))
        await asyncio.sleep(0.05)
    stale_reads = [s for s in seen if not s[2]]
    assert stale_reads and all(server == "standby" for _, server, _ in stale_reads)
    assert all(age <= MAX_LAG for age, _, _ in stale_reads), stale_reads
    assert seen[-1][1:] == ("primary", True)  # the lag outgrew the bound: the primary serves
    # A run the standby has not replayed is still found (the primary is asked).
    assert (await reads.history.get(reads.schedule.tenant_id, late)).run.id == late
    await reads.standby.execute("SELECT pg_wal_replay_resume()")
    await _standby_serves(reads, late)  # caught up: the standby serves again


async def test_a_standby_that_is_down_leaves_the_reads_to_the_primary(
    reads: Reads, pg_pair: EmbeddedPostgresPair
) -> None:
    run_id = await reads.add_run(0)
    await _standby_serves(reads, run_id)
    await reads.standby.close()
    await asyncio.to_thread(pg_pair.standby.stop)
    deadline = time.monotonic() + 2 * MAX_LAG + 1
    while time.monotonic() < deadline:  # every read answers, the standby's failures unseen
        assert run_id in await reads.ids()
        await asyncio.sleep(0.05)
    assert reads.servers[-1] == "primary"
    assert (await reads.history.get(reads.schedule.tenant_id, run_id)).run.id == run_id


async def test_nothing_is_written_through_the_read_side(pg_pair: EmbeddedPostgresPair) -> None:
    """The read pool's sessions are read-only even on a primary (a read URL that names
    one, or a standby since promoted)."""
    dsn = await ha_database(pg_pair)
    pool = await create_pool(single_host(pg_pair, dsn, standby=False), 1, read_only=True)
    try:
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await pool.execute("CREATE TABLE written_through_the_read_side (x int)")
    finally:
        await pool.close()


async def test_serve_reads_the_history_from_the_standby(
    pg_pair: EmbeddedPostgresPair, tmp_path: Path
) -> None:
    """The composition root wires it: a replica with SCHEDULER_DATABASE_READ_URL answers
    GET /v1/runs from the standby (its metrics say so) and writes to the primary."""
    dsn = await ha_database(pg_pair)
    pool = await create_pool(dsn, 2)
    try:
        issued = await PostgresTenantStore(pool).create("reader")
        async with ReplicaSet(dsn, log_dir=tmp_path) as fleet:
            api = await fleet.spawn("api-on-standby", roles="api", read_max_lag_seconds=MAX_LAG,
                                    database_read_url=single_host(pg_pair, dsn, standby=True))
            headers = {"Authorization": f"Bearer {issued.token}"}
            async with aiohttp.ClientSession() as http:
                async def from_the_standby() -> bool:
                    async with http.get(f"{api.base_url}/v1/runs", headers=headers) as answer:
                        assert answer.status == 200, await answer.text()
                    metrics = await api.metrics(http)
                    return metrics.get('scheduler_history_reads_total{server="standby"}', 0) > 0

                await wait_until(from_the_standby, within=30, every=0.2)
    finally:
        await pool.close()
