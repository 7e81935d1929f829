"""Scrape live replicas after real work: every metric the alert rules and the dashboard use
is exported, and the backlog gauge equals the count of due non-terminal runs."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import aiohttp
import asyncpg
import yaml

from cronwire.harness.seeding import seed_due_runs, seed_schedule, seed_tenant
from cronwire.harness.sink import Sink
from tests.support.replicas import Replica, ReplicaSet

REPO = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"\bscheduler_[a-z_]+\b")


def used_metric_names() -> set[str]:
    """Series names in the alert expressions and the dashboard queries."""
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yaml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    dashboard = json.loads((REPO / "deploy" / "grafana" / "cronwire.json").read_text())
    exprs += [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    return {name for expr in exprs for name in _NAME.findall(expr)}


async def _wait_gauge(replica: Replica, series: str, value: float, within: float) -> float:
    """Wait until ``series`` reads ``value`` (the gauges sample every few seconds)."""
    seen = float("nan")
    async with asyncio.timeout(within):
        while True:
            seen = (await replica.metrics()).get(series, float("nan"))
            if seen == value:
                return seen
            await asyncio.sleep(0.5)


async def test_live_replicas_export_every_metric_rules_and_dashboard_use(
    db_pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    async with Sink() as sink, ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        tenant = await seed_tenant(db_pool)  # type: ignore[arg-type]
        schedule = await seed_schedule(db_pool, tenant, sink.url)  # type: ignore[arg-type]
        await seed_due_runs(db_pool, schedule, 15)  # type: ignore[arg-type]

        # No executor yet: the 15 due runs wait, and the gauge reports exactly them.
        api = await fleet.spawn("ops-api", roles="api,planner")
        due = await db_pool.fetchval(
            "SELECT count(*) FROM job_run WHERE status IN ('pending', 'retrying', 'running')"
            " AND (status = 'running' OR fire_after <= now())")
        assert due == 15
        await _wait_gauge(api, "scheduler_runs_due_backlog", 15.0, within=30)

        executor = await fleet.spawn("ops-exec", roles="executor")
        await sink.wait_for(lambda s: s.unique >= 15, within=60)
        await _wait_gauge(api, "scheduler_runs_due_backlog", 0.0, within=30)

        async with aiohttp.ClientSession() as session:
            for replica in (api, executor):
                async with session.get(f"{replica.base_url}/readyz") as response:
                    assert response.status == 200, await response.text()
        exported = {key.split("{", 1)[0] for replica in (api, executor)
                    for key in await replica.metrics()}
        missing = used_metric_names() - exported
        assert not missing, f"used by rules/dashboard but not exported: {sorted(missing)}"
        samples = await executor.metrics()
        assert samples['scheduler_runs_total{outcome="succeeded"}'] >= 15
        assert samples['scheduler_claims_total{source="postgres"}'] >= 15
        assert samples["scheduler_fire_lag_seconds_count"] >= 15
        assert samples['scheduler_readiness{check="database"}'] == 1.0
        assert abs(samples["scheduler_clock_skew_seconds"]) < 1.0
        assert samples["scheduler_partitions_ahead_months"] >= 1
        (tmp_path / "metrics-sample.txt").write_text(
            "\n".join(f"{k} {v}" for k, v in sorted(samples.items())))
