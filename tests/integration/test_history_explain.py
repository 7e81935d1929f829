"""The history queries prune partitions and walk indexes: EXPLAIN over ~240,000 runs in
three monthly partitions (bulk INSERT ... SELECT generate_series, then ANALYZE).

Each query is checked twice: as asyncpg first runs it (a custom plan, pruned at plan
time) and as a prepared statement may later run it (a generic plan, pruned when the
executor starts: "Subplans Removed").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.run_history import Q, list_arguments
from cronwire.domain.history import RunQuery
from cronwire.domain.keyset import HistoryPosition
from cronwire.domain.model import RunStatus
from tests.support.servers import DatabaseFactory

# One corpus for the whole module (building it is most of the cost), on its own database.
pytestmark = pytest.mark.asyncio(loop_scope="module")

SCHEDULES_PER_TENANT = 40
POPULATED: set[str] = set()  # the corpus's partitions; filled by the fixture
RUNS_PER_SCHEDULE = 3000  # 2 tenants x 40 x 3000 = 240,000 runs


@dataclass(frozen=True)
class Corpus:
    pool: asyncpg.Pool
    tenant: uuid.UUID
    schedule: uuid.UUID
    months: list[datetime]  # first instants of last month, this month, next month
    partitions: list[str]  # their job_run partitions, same order


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def corpus(database_factory: DatabaseFactory) -> AsyncIterator[Corpus]:
    name, dsn = await database_factory.create()
    pool = await create_pool(dsn, 2)
    try:
        yield await _build(pool)
    finally:
        await pool.close()
        await database_factory.drop(name)


async def _build(db_pool: asyncpg.Pool) -> Corpus:
    async with db_pool.acquire() as conn:
        months = [r["m"] for r in await conn.fetch(
            "SELECT date_trunc('month', now()) + make_interval(months => i) AS m "
            "FROM generate_series(-1, 1) AS i ORDER BY 1")]
        tenants = [uuid.uuid4(), uuid.uuid4()]
        await conn.executemany("INSERT INTO tenant (id, name) VALUES ($1, 'explain')",
                               [(t,) for t in tenants])
        await conn.execute(
            """INSERT INTO schedule (id, tenant_id, name, cron, target, retry, signing_secret)
               SELECT gen_random_uuid(), t, 's' || g, '* * * * *',
                      '{"url": "http://127.0.0.1:9/"}', '{"max_attempts": 3}', 'whsec_x'
               FROM unnest($1::uuid[]) AS t, generate_series(1, $2) AS g""",
            tenants, SCHEDULES_PER_TENANT)
        span = (months[-1] + timedelta(days=31)).replace(day=1) - months[0]
        # Every schedule's runs spread evenly over the three months, statuses mixed.
        await conn.execute(
            """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                    status, fire_after)
               SELECT gen_random_uuid(), s.tenant_id, s.id, at, 'k',
                      (ARRAY['succeeded','succeeded','succeeded','failed','skipped'])[1 + g % 5],
                      at
               FROM schedule s, generate_series(0, $2 - 1) AS g,
                    LATERAL (SELECT $1::timestamptz + g * ($3::interval / $2)
                                    + make_interval(secs => (hashtext(s.id::text) & 1023))) AS x(at)""",
            months[0], RUNS_PER_SCHEDULE, span)
        await conn.execute("ANALYZE job_run")
        tenant = tenants[0]
        schedule = await conn.fetchval(
            "SELECT id FROM schedule WHERE tenant_id = $1 ORDER BY id LIMIT 1", tenant)
        partitions = [f"job_run_p{m:%Y_%m}" for m in months]
        count = await conn.fetchval("SELECT count(*) FROM job_run")
        assert count == 2 * SCHEDULES_PER_TENANT * RUNS_PER_SCHEDULE
        for name in partitions:
            assert await conn.fetchval(f"SELECT count(*) > 50000 FROM {name}")
    POPULATED.update(partitions, [p.replace("job_run_", "job_run_attempt_") for p in partitions])
    return Corpus(db_pool, tenant, schedule, months, partitions)


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


async def explain(conn: asyncpg.Connection, name: str, args: list[object], *,
                  generic: bool = False) -> list[dict[str, Any]]:
    """EXPLAIN ANALYZE of a named query with ``args``: a custom plan (the parameters are
    known to the planner), or the generic plan a prepared statement may switch to."""
    if generic:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute(f"PREPARE generic_q AS {Q[name]}")
        try:
            values = ", ".join(_literal(arg) for arg in args)  # EXECUTE takes no $n
            raw = await conn.fetchval(
                f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE generic_q({values})")
        finally:
            await conn.execute("DEALLOCATE generic_q")
    else:
        await conn.execute("SET plan_cache_mode = force_custom_plan")
        raw = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {Q[name]}", *args)
    document = json.loads(raw) if isinstance(raw, str) else raw
    return list(nodes(document[0]["Plan"]))


def scanned_partitions(plan: list[dict[str, Any]]) -> set[str]:
    return {n["Relation Name"] for n in plan if "Relation Name" in n}


def describe(plan: list[dict[str, Any]]) -> str:
    return "\n".join(f"{n['Node Type']} {n.get('Relation Name', '')} {n.get('Index Name', '')} "
                     f"rows={n.get('Actual Rows')} removed={n.get('Subplans Removed')} "
                     f"cond={n.get('Index Cond')} filter={n.get('Filter')}" for n in plan)


def indexes_used(plan: list[dict[str, Any]]) -> set[str]:
    return {n["Index Name"] for n in plan if "Index Name" in n}


def assert_index_access(plan: list[dict[str, Any]], partition_prefix: str) -> None:
    """Every access to a partition holding data goes through an index of the expected
    partitions. (An empty future partition has no statistics worth an index; the planner
    may read its zero pages directly, which costs nothing.)"""
    tables = [n for n in plan if n.get("Relation Name", "") in POPULATED]
    assert not [n for n in tables if n["Node Type"] == "Seq Scan"], describe(plan)
    assert tables, describe(plan)
    assert all(n["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")
               for n in tables), describe(plan)
    assert all(name.startswith(partition_prefix) for name in indexes_used(plan)), describe(plan)


def indexes_used_nodes(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n in plan if "Index Name" in n]


def rows_read(plan: list[dict[str, Any]]) -> float:
    return sum(n["Actual Rows"] for n in plan if "Relation Name" in n)


async def test_a_schedules_first_page_walks_its_occurrence_key(corpus: Corpus) -> None:
    name, args = list_arguments(corpus.tenant, RunQuery(limit=51, schedule_id=corpus.schedule))
    assert name == "job_run_list_for_schedule"
    async with corpus.pool.acquire() as conn:
        plan = await explain(conn, name, args)
        # Partitions newest first, each read backwards on its (schedule_id, scheduled_for)
        # key: no sort, and the LIMIT stops the walk after one page.
        assert_index_access(plan, "job_run_p")
        assert not [n for n in plan if n["Node Type"] == "Sort"], describe(plan)
        productive = [n for n in plan if "Relation Name" in n and n["Actual Rows"] > 0]
        assert productive and all(n["Index Name"].endswith("_schedule_id_scheduled_for_key")
                                  for n in productive), describe(plan)
        assert rows_read(plan) <= 51 + 3, describe(plan)
        assert plan[0]["Actual Rows"] == 51


async def test_a_since_until_window_prunes_to_its_month(corpus: Corpus) -> None:
    this_month = corpus.months[1]
    query = RunQuery(limit=51, since=this_month + timedelta(days=3),
                     until=this_month + timedelta(days=4))
    async with corpus.pool.acquire() as conn:
        for name, args in [list_arguments(corpus.tenant, query),
                           list_arguments(corpus.tenant,
                                          RunQuery(limit=51, since=query.since, until=query.until,
                                                   schedule_id=corpus.schedule))]:
            plan = await explain(conn, name, args)
            assert scanned_partitions(plan) == {corpus.partitions[1]}, describe(plan)
            assert_index_access(plan, corpus.partitions[1])
            generic = await explain(conn, name, args, generic=True)
            removed = sum(n.get("Subplans Removed", 0) for n in generic)
            assert removed >= 3, f"{name}: generic plan pruned {removed}\n{describe(generic)}"
            executed = {n["Relation Name"] for n in generic
                        if "Relation Name" in n and n.get("Actual Loops", 0) > 0}
            assert executed == {corpus.partitions[1]}, describe(generic)
            assert_index_access(generic, "job_run_p")


async def test_tenant_history_and_status_filter_use_their_indexes(corpus: Corpus) -> None:
    async with corpus.pool.acquire() as conn:
        name, args = list_arguments(corpus.tenant, RunQuery(limit=51))
        plan = await explain(conn, name, args)
        assert_index_access(plan, "job_run_p")
        # One descending scan of the status index per status (docs/benchmarks.md#levers), then the page's
        # rows by primary key: at most a page of keys from each of the corpus's three
        # statuses, and exactly one row per run shown.
        keys = [n for n in plan if n.get("Index Name", "").endswith(
            "_tenant_id_status_scheduled_for_id_idx")]
        rows = [n for n in plan if n.get("Index Name", "").endswith("_pkey")]
        assert keys and rows and len(keys) + len(rows) == len(indexes_used_nodes(plan)), \
            describe(plan)
        assert round(sum(n["Actual Rows"] * n["Actual Loops"] for n in keys)) <= 3 * 51, \
            describe(plan)
        assert round(sum(n["Actual Rows"] * n["Actual Loops"] for n in rows)) == 51, describe(plan)

        name, args = list_arguments(corpus.tenant, RunQuery(limit=51, status=RunStatus.FAILED))
        plan = await explain(conn, name, args)
        assert_index_access(plan, "job_run_p")
        assert all(i.endswith("_tenant_id_status_scheduled_for_id_idx")
                   for i in indexes_used(plan)), describe(plan)
        assert rows_read(plan) <= 51 + 3, describe(plan)


async def test_a_later_page_prunes_the_months_above_its_cursor(corpus: Corpus) -> None:
    cursor = HistoryPosition(corpus.months[0] + timedelta(days=10), uuid.UUID(int=0))
    async with corpus.pool.acquire() as conn:
        for schedule_id in (None, corpus.schedule):
            name, args = list_arguments(corpus.tenant,
                                        RunQuery(limit=51, before=cursor, schedule_id=schedule_id))
            plan = await explain(conn, name, args)
            assert scanned_partitions(plan) == {corpus.partitions[0]}, describe(plan)
            assert_index_access(plan, corpus.partitions[0])
            assert rows_read(plan) <= 51 + 3, describe(plan)


async def test_run_detail_probes_primary_keys_and_prunes_attempts(corpus: Corpus) -> None:
    async with corpus.pool.acquire() as conn:
        run = await conn.fetchrow("SELECT id, scheduled_for FROM job_run WHERE tenant_id = $1 "
                                  "LIMIT 1", corpus.tenant)
        plan = await explain(conn, "job_run_get", [corpus.tenant, run["id"]])
        assert_index_access(plan, "job_run_p")
        assert all(i.endswith("_pkey") for i in indexes_used(plan)), describe(plan)
        attempts = await explain(conn, "job_run_attempt_list",
                                 [corpus.tenant, run["id"], run["scheduled_for"]])
        # Both sides of run_attempt (migration 0030): the earlier attempts' month and the
        # run's own row (its final attempt), each reached by its primary key.
        month = f"{run['scheduled_for']:%Y_%m}"
        assert scanned_partitions(attempts) == {f"job_run_attempt_p{month}",
                                                f"job_run_p{month}"}, describe(attempts)
        assert all(i.endswith("_pkey") for i in indexes_used(attempts)), describe(attempts)
