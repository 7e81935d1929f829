"""`cronwire chaos`: real replicas, a real sink and a real Postgres on loopback, and
faults injected while schedules fire every second.

Each fault is one scenario with a fresh database and fresh processes, so its figures
are its own. The harness knows from the cron maths which runs must be delivered; the
receiver's records say what was delivered, twice or never (report.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.embedded.postgres import FAST_UNSAFE_SETTINGS, EmbeddedPostgres
from cronwire.bootstrap.factories import create_tenant, fresh_database, open_pool
from cronwire.chaos.faults import FAULTS, FaultSpec
from cronwire.chaos.lease_cut import CLAIM_MARKER
from cronwire.chaos.plan_checks import fault_refusal
from cronwire.chaos.proxy import ChaosProxy
from cronwire.chaos.queries import Q
from cronwire.chaos.report import Deliveries, Interruption, count_deliveries, figure_table
from cronwire.domain.cron import occurrences_between
from cronwire.domain.delivery import new_signing_secret
from cronwire.domain.documents import retry_to_document, target_to_document
from cronwire.domain.model import RetryPolicy, Target, run_id_for
from cronwire.harness.fleet import ChaosError, Replica, Sink, replica_env

CRON_EVERY_SECOND = "* * * * * *"
LEAD_SECONDS = 3.0  # first fire this long after the schedules are written
MAX_DRAIN_SECONDS = 180.0
RETRY = retry_to_document(RetryPolicy(5, 1.0, 5.0))


@dataclass(frozen=True, slots=True)
class ChaosPlan:
    mode: str
    faults: tuple[str, ...]
    schedules: int
    replicas: int
    duration: float
    out: Path
    burst: int = 50_000
    seed: int = 0
    dsn: str | None = None  # an admin DSN; None starts an embedded Postgres


@dataclass
class Scenario:
    """What a fault driver may touch while its scenario runs."""

    plan: ChaosPlan
    spec: FaultSpec
    pool: asyncpg.Pool
    http: aiohttp.ClientSession
    rng: random.Random
    replicas: list[Replica]
    first: datetime
    horizon: datetime
    postgres: EmbeddedPostgres | None
    broker: EmbeddedBroker | None
    proxy: ChaosProxy | None
    interruptions: list[Interruption] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def seconds_to(self, fraction: float) -> float:
        """Seconds from now until ``fraction`` of the firing window has passed."""
        at = self.first + (self.horizon - self.first) * fraction
        return max(0.0, (at - datetime.now(self.first.tzinfo)).total_seconds())

    def window_left(self) -> float:
        return (self.horizon - datetime.now(self.first.tzinfo)).total_seconds()

    async def leases_of(self, owner: str) -> dict[str, tuple[int, int]]:
        rows = await self.pool.fetch(Q["chaos_leases_of_owner"], owner)
        return {str(r["id"]): (r["lease_generation"], r["attempt_count"]) for r in rows}

    async def interrupt(self, replica: Replica, kind: str) -> Interruption:
        """kill -9 or SIGSTOP ``replica`` and record the leases it held at that moment."""
        at = time.time()
        if kind == "kill":
            replica.kill()
        else:
            import signal

            replica.signal(signal.SIGSTOP)
        found = Interruption(replica.name, kind, at, await self.leases_of(replica.name))
        self.interruptions.append(found)
        return found


def _log(message: str) -> None:
    print(f"[chaos] {message}", file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def _postgres(plan: ChaosPlan) -> AsyncIterator[tuple[str, EmbeddedPostgres | None]]:
    postgres = None
    admin = plan.dsn
    try:
        if admin is None:
            postgres = EmbeddedPostgres(plan.out / "postgres", settings=dict(FAST_UNSAFE_SETTINGS))
            admin = await asyncio.to_thread(postgres.start)
        yield admin, postgres
    finally:
        if postgres is not None and postgres.started_here:
            await asyncio.to_thread(postgres.stop)


@contextlib.asynccontextmanager
async def _broker(plan: ChaosPlan, out: Path) -> AsyncIterator[EmbeddedBroker | None]:
    """A fresh broker per fault, as the database is fresh per fault. One broker shared by
    every fault carried the consumer group of the faults before (members killed, stopped,
    restarted): tansu then rebalanced the group every ~13 s for as long as it ran, each
    time holding every consumer's fetch through a 5 s join, and the fairness fault that
    came last measured that instead of the claim."""
    if plan.mode != "kafka":
        yield None
        return
    broker = EmbeddedBroker(out / "broker.log")
    await asyncio.to_thread(broker.start)
    try:
        yield broker
    finally:
        await asyncio.to_thread(broker.stop)


async def _seed(pool: asyncpg.Pool, spec: FaultSpec, plan: ChaosPlan, sink: Sink,
                tenants: list[uuid.UUID]) -> tuple[dict[str, float], datetime, datetime, dict[str, set[str]]]:
    """Schedules firing every second from the first instant after the lead time for
    ``duration`` seconds; for the fairness fault also one tenant's burst of due runs.
    Returns (planned run id -> due epoch, first, horizon, groups of run ids)."""
    db_now: datetime = await pool.fetchval(Q["chaos_now"])
    first = occurrences_between(CRON_EVERY_SECOND, "UTC", db_now + timedelta(seconds=LEAD_SECONDS),
                                db_now + timedelta(hours=1), 1)[0]
    horizon = first + timedelta(seconds=plan.duration)
    occurrences = occurrences_between(CRON_EVERY_SECOND, "UTC", first - timedelta(microseconds=1),
                                      horizon, 10_000_000)
    planned: dict[str, float] = {}
    groups: dict[str, set[str]] = {"steady": set(), "burst": set()}
    steady_tenants = tenants[1:] if spec.burst else tenants
    per_tenant = 1 if spec.burst else plan.schedules
    target = target_to_document(Target(f"{sink.base}/d/{spec.sink_delay_ms}/hook"))
    for tenant in steady_tenants:
        ids = [uuid.uuid4() for _ in range(per_tenant)]
        await pool.execute(Q["chaos_schedules_insert"], ids, tenant, CRON_EVERY_SECOND, target,
                           RETRY, first, horizon, new_signing_secret())
        for sid in ids:
            for at in occurrences:
                run_id = str(run_id_for(sid, at))
                planned[run_id] = at.timestamp()
                groups["steady"].add(run_id)
    if spec.burst:
        burst_target = dict(target, url=f"{sink.base}/d/{spec.burst_delay_ms}/burst")
        schedule_id = uuid.uuid4()
        await pool.execute(Q["chaos_burst_schedule_insert"], schedule_id, tenants[0],
                           burst_target, RETRY, new_signing_secret())
        rows = await pool.fetch(Q["chaos_burst_runs_insert"], tenants[0], schedule_id,
                                plan.burst, first)
        for row in rows:
            planned[str(row["id"])] = first.timestamp()
            groups["burst"].add(str(row["id"]))
    return planned, first, horizon, groups


async def _drain(scenario: Scenario, sink: Sink, tenants: list[uuid.UUID], planned: int) -> float:
    """Until the planner has passed the horizon, every run up to it is terminal and the
    sink has seen every planned run (bounded). Returns seconds past the horizon."""
    deadline = time.monotonic() + MAX_DRAIN_SECONDS
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, asyncpg.PostgresError, aiohttp.ClientError):
            unplanned = await scenario.pool.fetchval(Q["chaos_unplanned"], tenants, scenario.horizon)
            unfinished = await scenario.pool.fetchval(Q["chaos_unfinished"], tenants, scenario.horizon)
            if unplanned == 0 and unfinished == 0 and await sink.unique(scenario.http) >= planned:
                break
        await asyncio.sleep(0.25)
    counts = {r["status"]: r["n"] for r in await scenario.pool.fetch(Q["chaos_run_counts"], tenants)}
    _log(f"run states: {counts}")
    scenario.figures["run_states"] = counts
    return max(0.0, -scenario.window_left())


async def run_scenario(plan: ChaosPlan, name: str, admin: str,
                       postgres: EmbeddedPostgres | None) -> dict[str, Any]:
    out = plan.out / name
    out.mkdir(parents=True, exist_ok=True)
    async with _broker(plan, out) as broker:
        return await _run_scenario(plan, name, admin, postgres, broker)


async def _run_scenario(plan: ChaosPlan, name: str, admin: str, postgres: EmbeddedPostgres | None,
                        broker: EmbeddedBroker | None) -> dict[str, Any]:
    spec = FAULTS[name]
    out = plan.out / name
    rng = random.Random(f"{plan.seed}/{name}")
    dsn = await fresh_database(admin, f"chaos_{name.replace('-', '_')}_{int(time.time())}")
    pool = await open_pool(dsn, 4)
    sink = Sink(out / "deliveries.jsonl")
    proxy = None
    replicas: list[Replica] = []
    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
    try:
        await sink.start()
        replica_dsn = proxied_dsn = dsn
        if spec.proxy or spec.victim_proxy:
            host, port = admin.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)
            proxy = await ChaosProxy(host, int(port), rng).start()
            proxy.watch(CLAIM_MARKER)
            proxied_dsn = dsn.replace(f"{host}:{port}", f"127.0.0.1:{proxy.port}")
            replica_dsn = dsn if spec.victim_proxy else proxied_dsn
        env = replica_env(replica_dsn, delivery_timeout=spec.delivery_timeout,
                          workers=spec.workers, mode=plan.mode,
                          bootstrap=broker.bootstrap if broker else None)
        (out / "replicas").mkdir(exist_ok=True)
        for index in range(plan.replicas):
            extra = spec.replica_env(index)
            if spec.victim_proxy and index == 0:  # only the first replica's database path
                extra = dict(extra, SCHEDULER_DATABASE_URL=proxied_dsn)
            replicas.append(Replica(f"{name}-{index}", dict(env, **extra), out / "replicas"))
        await asyncio.gather(*(replica.start() for replica in replicas))
        tenant_count = 10 if spec.burst else 1
        tenants = [await create_tenant(pool, f"chaos-{name}-{i}") for i in range(tenant_count)]
        planned, first, horizon, groups = await _seed(pool, spec, plan, sink, tenants)
        _log(f"{name}: {len(planned)} runs planned from {first:%H:%M:%S}Z over "
             f"{plan.duration:.0f}s, {plan.replicas} {plan.mode} replicas")
        scenario = Scenario(plan, spec, pool, http, rng, replicas, first, horizon, postgres,
                            broker, proxy)
        scenario.figures["planned_due"] = planned
        await asyncio.sleep(scenario.seconds_to(0.0))
        await spec.drive(scenario)
        await asyncio.sleep(max(0.0, scenario.window_left()))
        drain = await _drain(scenario, sink, tenants, len(planned))
        if spec.observe is not None:
            await spec.observe(scenario, groups)
        exits = [r.name for r in replicas if not r.alive()]
    finally:
        for replica in replicas:
            await asyncio.to_thread(replica.stop)
        await asyncio.to_thread(sink.stop)
        if proxy is not None:
            await proxy.close()
        await http.close()
    try:
        seen = Deliveries.load(sink.out)
        figures: dict[str, Any] = count_deliveries(planned, seen, scenario.interruptions)
        figures["drain_seconds"] = round(drain, 2)
        figures["replica_exits"] = len(exits)
        figures["fault_figures"] = dict(scenario.figures.pop("fault", {}))
        figures["interruptions"] = [
            {"owner": i.owner, "kind": i.kind, "at": round(i.at, 3), "leases": len(i.leases)}
            for i in scenario.interruptions
        ]
        if spec.summarize is not None:
            spec.summarize(scenario, groups, seen, figures)
        figures["run_states"] = scenario.figures.get("run_states", {})
        violations = spec.verdict(figures)
        figures["violations"] = violations
        figures["passed"] = not violations
        (out / "figures.json").write_text(json.dumps(figures, indent=2, default=str))
        return figures
    finally:
        await pool.close()


async def run_chaos_async(plan: ChaosPlan) -> dict[str, Any]:
    plan.out.mkdir(parents=True, exist_ok=True)
    refusal = fault_refusal(plan.mode, plan.faults, plan.dsn)
    if refusal is not None:
        raise ChaosError(refusal)
    scenarios: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    async with _postgres(plan) as (admin, postgres):
        for name in plan.faults:
            scenarios[name] = await run_scenario(plan, name, admin, postgres)
            _log(f"{name}: {'ok' if scenarios[name]['passed'] else 'FAILED'}")
    return {
        "mode": plan.mode, "replicas": plan.replicas, "schedules": plan.schedules,
        "duration": plan.duration, "burst": plan.burst, "seed": plan.seed,
        "elapsed_seconds": round(time.monotonic() - started, 1),
        "passed": all(s["passed"] for s in scenarios.values()),
        "scenarios": scenarios,
    }


def run_chaos(plan: ChaosPlan) -> dict[str, Any]:
    """Run every chosen fault; writes ``out/report.json`` and prints the figure table."""
    # The harness's own pool loses its connections when a fault restarts Postgres; that
    # is the fault working, not news.
    logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)
    report = asyncio.run(run_chaos_async(plan))
    (plan.out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    print(figure_table(report["scenarios"]))
    return report
