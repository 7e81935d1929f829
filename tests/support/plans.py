"""EXPLAIN tests of the claim and resolve: one schedule's due runs on a connection of their
own, and the nodes of a JSON plan."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from cronwire.adapters.postgres.pool import create_pool
from cronwire.harness.seeding import SeededSchedule, seed_due_runs, seed_schedule, seed_tenant


@asynccontextmanager
async def due_runs_on_a_connection(
        database_url: str, count: int) -> AsyncIterator[tuple[asyncpg.Connection, SeededSchedule]]:
    """A connection to ``database_url`` where one schedule has ``count`` runs due."""
    pool = await create_pool(database_url, 1)
    conn = await pool.acquire()
    try:
        tenant = await seed_tenant(conn)
        schedule = await seed_schedule(conn, tenant, "http://127.0.0.1:9/")
        await seed_due_runs(conn, schedule, count)
        yield conn, schedule
    finally:
        await pool.release(conn)
        await pool.close()


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan, parents first."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)
