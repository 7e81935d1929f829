"""Under 'allow' (the default overlap policy) the overlap machinery of the claim and the
resolve does no work per run: EXPLAIN ANALYZE of a claim of fresh runs and of the batch of
successes that ends them shows none of their per-row subplans executed. In SQL, ``NULL AND x`` still evaluates ``x`` (it is NULL or false depending on
it), so a test on a nullable column must never be NULL when it guards a subquery."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from cronwire.adapters.postgres.sql import queries
from tests.support.plans import due_runs_on_a_connection, executed_plans, plan_nodes

Q = queries()
RUNS = 40


@pytest.mark.asyncio
async def test_a_batch_of_successes_under_allow_runs_no_per_row_subplan(
        database_url: str) -> None:
    async with due_runs_on_a_connection(database_url, RUNS) as (conn, schedule):
        tenant = schedule.tenant_id
        # The claim's own plan and its tail function's (cronwire_claim_tail), as run.
        async with executed_plans(conn) as claim_plans:
            await conn.fetch(Q["job_run_claim"], "owner", RUNS, 30.0, 0.0, None)
        claimed = await conn.fetch(
            "SELECT id, scheduled_for, attempt_count, lease_generation FROM job_run"
            " WHERE claimed_by = 'owner' AND status = 'running'")
        assert len(claimed) == RUNS
        now = datetime.now(UTC)
        n = len(claimed)
        raw = await conn.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + Q["job_run_resolve"], "owner",
            [r["id"] for r in claimed], [r["scheduled_for"] for r in claimed],
            ["succeeded"] * n, [r["attempt_count"] for r in claimed], [None] * n,
            [200] * n, [None] * n, [tenant] * n, [now] * n, [now] * n, ["success"] * n,
            [5] * n, [None] * n, [r["lease_generation"] for r in claimed],
            None)  # no Retry-After hold in the batch (flow control): the array is NULL
        resolved = await conn.fetchval(
            "SELECT count(*) FROM job_run WHERE schedule_id = $1 AND status = 'succeeded'",
            schedule.id)
        assert resolved == RUNS  # the statement really ran (EXPLAIN ANALYZE executes it)
    # Flow control reads, once per due tenant (not per run), which of the tenant's keys
    # admit nothing now (ADR 0040): one index probe of flow_control, empty here.
    assert [(relation, loops) for logged in claim_plans
            for _, _, relation, loops in _subplans_run(logged["Plan"])] == [("flow_control", 1)]
    assert _subplans_run((json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]) == []


def _subplans_run(plan: dict[str, Any]) -> list[tuple[object, ...]]:
    return [(n.get("Subplan Name"), n["Node Type"], n.get("Relation Name"), n["Actual Loops"])
            for n in plan_nodes(plan)
            if n.get("Parent Relationship") == "SubPlan" and n["Actual Loops"] > 0]
