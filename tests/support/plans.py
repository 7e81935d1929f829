"""EXPLAIN tests of the claim and resolve: one schedule's due runs on a connection of their
own, and the nodes of a JSON plan."""

from __future__ import annotations

import asyncio
import json
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


@asynccontextmanager
async def executed_plans(conn: asyncpg.Connection) -> AsyncIterator[list[dict[str, Any]]]:
    """The analysed plans (auto_explain's JSON: "Query Text" and "Plan") of every statement
    run on ``conn`` inside the block, the statements run by functions included: the claims
    hand their candidates to a function (cronwire_claim_tail), whose update a plain EXPLAIN
    of the claim does not show. Filled in as the statements finish."""
    plans: list[dict[str, Any]] = []

    def logged(_conn: object, message: Any) -> None:
        _, found, plan = str(message.message).partition("plan:\n")
        if found:
            plans.append(json.loads(plan))

    await conn.execute("LOAD 'auto_explain'")
    for setting in ("log_analyze = on", "log_nested_statements = on", "log_format = json",
                    "log_level = notice", "log_min_duration = 0"):
        await conn.execute(f"SET auto_explain.{setting}")
    conn.add_log_listener(logged)
    try:
        yield plans
    finally:
        await conn.execute("SET auto_explain.log_min_duration = -1")
        await asyncio.sleep(0)  # the listener is called soon after each notice, not at once
        conn.remove_log_listener(logged)
