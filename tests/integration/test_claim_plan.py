"""The claim's last step, the UPDATE of the claimed rows, reaches each of them by one probe
of its partition's primary key with that run's own key, whatever the plan and the
statistics. Migration 0029 steered the probes with an array of the whole batch's ids, which
Postgres prepared again at every probe, once per claimed run (about a tenth of Postgres's
CPU per run in bench_claim_write.py); migration 0032 dropped it, and the tail's
enable_seqscan = off, enable_bitmapscan = off and ROWS 256 keep the probes on the primary
key by themselves (docs/benchmarks.md#levers). Checked on the plan Postgres makes for the
first claims (custom) and the one a prepared statement may switch to (generic), over a
table large enough that a scan of it would show.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import asyncpg
import pytest

from cronwire.adapters.postgres.sql import queries
from tests.support.plans import due_runs_on_a_connection, executed_plans, plan_nodes

Q = queries()
RUNS = 20_000
LIMIT = 128


STATISTICS = ["fresh", "none", "from before the runs were due",
              "from before the runs were planned"]


async def _statistics(conn: asyncpg.Connection, statistics: str) -> None:
    """job_run's statistics as a claim may meet them: fresh, never taken (a burst's partition
    written since the last ANALYZE), or taken while the runs were not due yet or not
    written yet (the planner writes a burst ahead; ANALYZE then saw no runnable run)."""
    if statistics == "fresh":
        await conn.execute("ANALYZE job_run")
    elif statistics == "from before the runs were due":
        await conn.execute("UPDATE job_run SET fire_after = now() + interval '1 hour'")
        await conn.execute("ANALYZE job_run")
        await conn.execute("UPDATE job_run SET fire_after = now() - interval '1 second'")
    elif statistics == "from before the runs were planned":
        # no run was runnable or leased: the partial indexes looked empty
        await conn.execute("UPDATE job_run SET status = 'succeeded'")
        await conn.execute("ANALYZE job_run")
        await conn.execute("UPDATE job_run SET status = 'pending'")


async def _explain_prepared(conn: asyncpg.Connection, name: str, plan_mode: str,
                            arguments: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The nodes of one analysed execution of the prepared statement ``name`` (rolled
    back) under ``plan_mode``: of its update of the claimed rows (the statement of the tail
    function every claim calls, planned under the same mode), and of every plan it ran. It
    must have claimed LIMIT runs."""
    await conn.execute(f"SET plan_cache_mode = {plan_mode}")
    await conn.execute(f"PREPARE {name} AS {Q[name]}")
    transaction = conn.transaction()
    await transaction.start()
    try:
        async with executed_plans(conn) as plans:
            await conn.execute(f"EXECUTE {name}({arguments})")
    finally:
        await transaction.rollback()
        await conn.execute(f"DEALLOCATE {name}")
    every = [node for logged in plans for node in plan_nodes(logged["Plan"])]
    updates = [logged["Plan"] for logged in plans if "UPDATE job_run j" in logged["Query Text"]]
    assert len(updates) == 1, _describe(every)
    plan = updates[0]
    nodes = list(plan_nodes(plan))
    assert plan["Node Type"] == "ModifyTable" and plan["Actual Rows"] == LIMIT, _describe(nodes)
    return nodes, every


def _array(values: Iterable[object]) -> str:
    """An array literal for EXECUTE, which takes no bind parameters under EXPLAIN."""
    return "ARRAY[" + ",".join(f"'{value}'" for value in values) + "]"


def _describe(nodes: list[dict[str, Any]]) -> str:
    return "\n".join(f"{n['Node Type']} {n.get('Relation Name', '')} {n.get('Index Name', '')} "
                     f"loops={n.get('Actual Loops')} cond={n.get('Index Cond')}" for n in nodes)


async def _leased(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    """Every run of the connection's schedule leased by "owner": 20,000 leases in flight,
    taken after the statistics were."""
    leased: list[asyncpg.Record] = []
    while len(leased) < RUNS:
        leased += await conn.fetch(Q["job_run_claim"], "owner", 1000, 300.0, 0.0, None)
    return leased


async def _analysed(conn: asyncpg.Connection, plan_mode: str, name: str,
                    *args: object) -> list[dict[str, Any]]:
    """The nodes of one analysed execution of statement ``name`` under ``plan_mode``,
    rolled back."""
    await conn.execute(f"SET plan_cache_mode = {plan_mode}")
    transaction = conn.transaction()
    await transaction.start()
    try:
        explain = await conn.prepare(f"EXPLAIN (ANALYZE, FORMAT JSON) {Q[name]}")
        raw = await explain.fetchval(*args)
    finally:
        await transaction.rollback()
    return list(plan_nodes((json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]))


def _assert_reached_by_key(nodes: list[dict[str, Any]], partition: str, rows: int,
                           entries_a_row: int = 3) -> None:
    """No scan of the partition, no bitmap, and at most ``entries_a_row`` index entries a
    row (three by default: each leased row has one dead version beside it, the claim's
    update)."""
    ran = [n for n in nodes if n.get("Actual Loops", 0) > 0]
    assert not [n for n in ran if n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan")
                and n.get("Relation Name") == partition], _describe(nodes)
    read = sum(n.get("Actual Rows", 0) * n["Actual Loops"] for n in ran
               if n.get("Index Name", "").startswith(partition))
    assert read <= entries_a_row * rows, \
        f"{read} index entries read for {rows} rows\n{_describe(nodes)}"


@pytest.mark.asyncio
@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("statistics", STATISTICS)
async def test_the_claim_reaches_each_row_by_its_own_primary_key(
        database_url: str, plan_mode: str, statistics: str) -> None:
    async with due_runs_on_a_connection(database_url, RUNS) as (conn, _schedule):
        await _statistics(conn, statistics)
        partition = await conn.fetchval("SELECT tableoid::regclass::text FROM job_run LIMIT 1")
        nodes, every = await _explain_prepared(conn, "job_run_claim", plan_mode,
                                               f"'owner', {LIMIT}, 30.0, 0.0, NULL")
    assert not [n for n in every if n.get("Actual Loops", 0) > 0 and n["Node Type"] == "Seq Scan"
                and n.get("Relation Name") == partition], _describe(every)
    assert not [n for n in nodes if n.get("Actual Loops", 0) > 0
                and n["Node Type"] == "Bitmap Heap Scan"], _describe(nodes)
    probes = [n for n in nodes if n.get("Actual Loops", 0) > 0
              and n.get("Index Name", "") == f"{partition}_pkey"]
    assert probes, _describe(nodes)
    read = sum(n["Actual Rows"] * n["Actual Loops"] for n in probes)
    # One entry a claimed run; a dead version's entry beside it at most.
    assert read <= 2 * LIMIT, f"{read} entries read for {LIMIT} rows\n{_describe(nodes)}"
    conditions = [n.get("Index Cond") or "" for n in probes]
    assert not [c for c in conditions if "ANY" in c], \
        f"a probe carries an array of ids\n{_describe(nodes)}"
    assert all("id = d.id" in c and "scheduled_for = d.scheduled_for" in c
               for c in conditions), _describe(nodes)


@pytest.mark.asyncio
@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("statistics", STATISTICS)
async def test_the_claim_by_keys_reads_only_its_keys_rows(
        database_url: str, plan_mode: str, statistics: str) -> None:
    """Kafka mode's claim finds its keys' rows through the primary key alone and checks
    each row against its own key.

    Two plans did more. A semi-join with the key list was planned as a nested loop that
    compared every row with half the list (8,128 comparisons for 128 keys). And in a burst
    the statistics are older than the burst's runs being due (the planner wrote them
    ahead; ANALYZE saw them in the future), so "due now" looked rare: Postgres ANDed a
    bitmap of the claim index's due entries (every run of the burst still unclaimed,
    131,828 in one logged plan, 4-8 ms a claim) with the primary key's. And with no
    statistics at all (a partition never analysed yet), the first plans of a connection
    found the keys' rows by a sequential scan of the partition: 20,000 rows read for 128
    keys, before each key became a probe of its own."""
    async with due_runs_on_a_connection(database_url, RUNS) as (conn, _schedule):
        await _statistics(conn, statistics)
        partition = await conn.fetchval("SELECT tableoid::regclass::text FROM job_run LIMIT 1")
        keys = await conn.fetch("SELECT id, scheduled_for FROM job_run ORDER BY random() "
                                "LIMIT $1", LIMIT)
        _update, nodes = await _explain_prepared(
            conn, "job_run_claim_keys", plan_mode,
            f"'owner', {LIMIT}, 30.0, {_array(k['id'] for k in keys)}::uuid[], "
            f"{_array(k['scheduled_for'].isoformat() for k in keys)}::timestamptz[], NULL")
    compared = sum(n.get("Rows Removed by Join Filter", 0) for n in nodes)
    assert compared < LIMIT, f"{compared} rows compared with keys\n{_describe(nodes)}"
    read = max(n.get("Actual Rows", 0) for n in nodes
               if n.get("Relation Name") == partition or n.get("Index Name", "").startswith(
                   partition))
    assert read <= 2 * LIMIT, f"{read} entries read for {LIMIT} keys\n{_describe(nodes)}"
    ran = [n for n in nodes if n.get("Actual Loops", 0) > 0]
    assert not [n for n in ran if n["Node Type"] == "Seq Scan"
                and n.get("Relation Name") == partition], _describe(nodes)


@pytest.mark.asyncio
@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("statistics", STATISTICS)
async def test_the_count_of_held_keys_reads_only_their_rows(
        database_url: str, plan_mode: str, statistics: str) -> None:
    """After a claim of keys that flow control held back, kafka mode counts which of those
    keys' runs are still runnable (job_run_held_keys): one probe per key, as the claim of
    keys does. Written with "id = ANY" over the key array, a partition without statistics
    was read whole by a sequential scan for it."""
    async with due_runs_on_a_connection(database_url, RUNS) as (conn, _schedule):
        await _statistics(conn, statistics)
        partition = await conn.fetchval("SELECT tableoid::regclass::text FROM job_run LIMIT 1")
        keys = await conn.fetch("SELECT id, scheduled_for FROM job_run ORDER BY random() "
                                "LIMIT $1", LIMIT)
        nodes = await _analysed(conn, plan_mode, "job_run_held_keys",
                                [k["id"] for k in keys], [k["scheduled_for"] for k in keys])
    assert nodes[0]["Actual Rows"] == 1, _describe(nodes)
    _assert_reached_by_key(nodes, partition, LIMIT, entries_a_row=2)


@pytest.mark.asyncio
@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("statistics", STATISTICS)
async def test_the_resolve_reaches_its_rows_by_primary_key_whatever_the_statistics(
        database_url: str, plan_mode: str, statistics: str) -> None:
    """The resolve of 128 results among 20,000 leases taken after the statistics were (a
    burst's): written with plain lease conditions, it read the whole lease index, every
    lease of the burst, to write 128 rows (docs/benchmarks.md#levers)."""
    async with due_runs_on_a_connection(database_url, RUNS) as (conn, _schedule):
        await _statistics(conn, statistics)
        partition = await conn.fetchval("SELECT tableoid::regclass::text FROM job_run LIMIT 1")
        batch = (await _leased(conn))[:LIMIT]
        now = await conn.fetchval("SELECT now()")
        nodes = await _analysed(
            conn, plan_mode, "job_run_resolve",
            "owner", [r["id"] for r in batch], [r["scheduled_for"] for r in batch],
            ["succeeded"] * LIMIT, [r["attempt_count"] for r in batch], [0.0] * LIMIT,
            [200] * LIMIT, [None] * LIMIT, [r["tenant_id"] for r in batch], [now] * LIMIT,
            [now] * LIMIT, ["success"] * LIMIT, [3] * LIMIT, [None] * LIMIT,
            [r["lease_generation"] for r in batch], [None] * LIMIT)
    written = [n for n in nodes if n["Node Type"] == "ModifyTable"
               and n.get("Relation Name") == "job_run"]
    assert written and written[0]["Actual Rows"] == LIMIT, _describe(nodes)
    _assert_reached_by_key(nodes, partition, LIMIT)


@pytest.mark.asyncio
@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("statistics", STATISTICS)
@pytest.mark.parametrize("name", ["job_run_renew", "job_run_give_back", "job_run_superseded"])
async def test_the_lease_upkeep_reaches_its_rows_by_primary_key(
        database_url: str, plan_mode: str, statistics: str, name: str) -> None:
    """One replica's renewal, give-back or superseded check of 128 leases among 20,000 in
    flight. Written with plain lease conditions, each read the whole lease index (every
    lease in flight, on every replica: 20,000 entries for 128 here), so each replica's
    upkeep cost grew with the whole fleet's load; written as the resolve's CASE, each
    lease is one probe of the primary key."""
    async with due_runs_on_a_connection(database_url, RUNS) as (conn, _schedule):
        await _statistics(conn, statistics)
        partition = await conn.fetchval("SELECT tableoid::regclass::text FROM job_run LIMIT 1")
        batch = (await _leased(conn))[:LIMIT]
        keys = ([r["id"] for r in batch], [r["scheduled_for"] for r in batch],
                [r["lease_generation"] for r in batch])
        extra: tuple[object, ...] = {"job_run_renew": ([True] * LIMIT, 300.0),
                                     "job_run_give_back": (None,),
                                     "job_run_superseded": ()}[name]
        nodes = await _analysed(conn, plan_mode, name, "owner", *keys, *extra)
    if name != "job_run_superseded":  # none of these leases is cancel_other
        assert nodes[0]["Actual Rows"] == (LIMIT if name == "job_run_renew" else 1), \
            _describe(nodes)
    _assert_reached_by_key(nodes, partition, LIMIT)
