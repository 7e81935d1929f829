"""The API's own resources (ADR 0055): a database pool apart from the one that claims,
renews leases and writes results, and the lane its CPU-heavy work runs in. Wired by the
container; a replica without the ``api`` role opens neither pool."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import asyncpg

from cronwire.adapters.cpu_lane import CpuLane
from cronwire.adapters.postgres.pool import create_pool
from cronwire.config import Settings


async def api_pool_resource(settings: Settings) -> AsyncIterator[asyncpg.Pool | None]:
    """SCHEDULER_API_DB_POOL_SIZE connections on the primary (the same multi-host URL and
    session settings as the replica's own pool, so a failover or a restart of Postgres is
    survived the same way: connections are made anew on demand). None without an API."""
    if "api" not in settings.roles:
        yield None
        return
    assert settings.database_url is not None, "serve resolves the embedded database first"
    pool = await create_pool(settings.database_url, settings.api_db_pool_size,
                             tenant_max_concurrency=settings.tenant_max_concurrency)
    try:
        yield pool
    finally:
        await pool.close()


# While the lane's thread computes, every socket call of the event loop releases the GIL
# and then waits for the lane to hand it back: up to the switch interval (5 ms by default)
# each, and an HTTP request's callback makes several. Measured with 64 backfill dry runs
# (tests/integration/test_api_stalls_nothing.py): the loop spent ~4 ms in each send() and
# recv(). At 0.5 ms the wait is a tenth; the lane's thread switches more often, which costs
# it microseconds. Without a second busy thread the interval is never used.
SWITCH_INTERVAL_SECONDS = 0.0005


async def cpu_lane_resource() -> AsyncIterator[CpuLane]:
    """One lane per replica: every request's CPU-heavy work queues in it."""
    lane = CpuLane()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, SWITCH_INTERVAL_SECONDS))
    try:
        yield lane
    finally:
        lane.close()
        sys.setswitchinterval(interval)
