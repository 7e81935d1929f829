"""A backfill walks first, then writes (ADR 0055): the walk runs in the CPU lane with no
connection held and no transaction open, and a schedule edited while it walked is walked
again, so the runs written are always the occurrences of the definition they are written
under."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

import pytest

from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.run_commands import WALK_TRIES, PostgresRunCommands
from cronwire.domain.backfill import BackfillRequest
from cronwire.domain.errors import StateConflict
from cronwire.service import run_commands
from tests.support.api import DEFAULT_LIMITS, Api, api_fixture  # noqa: F401

T = TypeVar("T")


class Lane:
    """A CpuWork that, before each walk, runs ``meanwhile`` (what may happen while a real
    lane computes) and counts the walks."""

    def __init__(self, meanwhile: Callable[[int], Awaitable[None]]) -> None:
        self.meanwhile = meanwhile
        self.walks = 0

    async def run(self, work: Callable[[], T]) -> T:
        self.walks += 1
        await self.meanwhile(self.walks)
        return work()


async def _hourly(api: Api) -> tuple[uuid.UUID, uuid.UUID]:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, cron="0 * * * *", timezone="UTC")
    return tenant.id, uuid.UUID(created["id"])


async def test_the_walk_holds_no_connection_of_the_pool(api: Api, database_url: str) -> None:
    tenant, schedule = await _hourly(api)
    one = await create_pool(database_url, 1)
    try:
        async def pool_is_free(_walk: int) -> None:
            # With one connection in the pool, this waits forever if the walk held it.
            assert await one.fetchval("SELECT 1", timeout=5) == 1

        lane = Lane(pool_is_free)
        now = await api.pool.fetchval("SELECT date_trunc('hour', now())")
        request = BackfillRequest(now - timedelta(hours=6), now - timedelta(hours=1))
        result = await run_commands.backfill(PostgresRunCommands(one, cpu=lane),
                                             DEFAULT_LIMITS, tenant,
                                             schedule, request)
    finally:
        await one.close()
    assert (lane.walks, result.created) == (1, 5)


async def test_a_schedule_edited_while_it_walked_is_walked_again(api: Api) -> None:
    tenant, schedule = await _hourly(api)

    async def edit_during_the_first_walk(walk: int) -> None:
        if walk == 1:
            await api.pool.execute("UPDATE schedule SET cron = '30 * * * *' WHERE id = $1",
                                   schedule)

    lane = Lane(edit_during_the_first_walk)
    now = await api.pool.fetchval("SELECT date_trunc('hour', now())")
    request = BackfillRequest(now - timedelta(hours=4), now - timedelta(hours=1))
    result = await run_commands.backfill(PostgresRunCommands(api.pool, cpu=lane),
                                         DEFAULT_LIMITS, tenant,
                                         schedule, request)
    written = [row["scheduled_for"] for row in await api.pool.fetch(
        "SELECT scheduled_for FROM job_run WHERE schedule_id = $1 ORDER BY 1", schedule)]
    assert lane.walks == 2
    assert written == [now - timedelta(hours=h, minutes=30) for h in (3, 2, 1)]
    assert result.created == 3


async def test_a_schedule_that_keeps_changing_is_a_conflict(api: Api) -> None:
    tenant, schedule = await _hourly(api)

    async def edit_every_time(walk: int) -> None:
        await api.pool.execute("UPDATE schedule SET cron = $2 WHERE id = $1", schedule,
                               f"{walk} * * * *")

    now = await api.pool.fetchval("SELECT date_trunc('hour', now())")
    lane = Lane(edit_every_time)
    with pytest.raises(StateConflict, match="changed 3 times"):
        await run_commands.backfill(PostgresRunCommands(api.pool, cpu=lane), DEFAULT_LIMITS,
                                    tenant, schedule,
                                    BackfillRequest(now - timedelta(hours=4), now))
    assert lane.walks == WALK_TRIES
    assert await api.pool.fetchval("SELECT count(*) FROM job_run WHERE schedule_id = $1",
                                   schedule) == 0
