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
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from cronwire.bootstrap.embedded import (
    FAST_UNSAFE_SETTINGS,
    LINKED_BINARIES,
    EmbeddedBroker,
    EmbeddedPostgres,
    EmbeddedPostgresPair,
)
from cronwire.bootstrap.factories import fresh_database, open_pool
from cronwire.chaos.faults import FAULTS
from cronwire.chaos.lease_cut import CLAIM_MARKER
from cronwire.chaos.plan import ChaosError, ChaosPlan
from cronwire.chaos.plan_checks import fault_refusal
from cronwire.chaos.proxy import ChaosProxy
from cronwire.chaos.queries import Q
from cronwire.chaos.report import Deliveries, count_deliveries, figure_table
from cronwire.chaos.scenario import Scenario
from cronwire.chaos.seed import seed
from cronwire.chaos.verdicts import outcome, summary, verdict_cell
from cronwire.harness.fleet import Fleet, replica_env
from cronwire.harness.seeding import seed_tenant
from cronwire.harness.sink_process import SinkProcess

MAX_DRAIN_SECONDS = 180.0
STOP_SECONDS = 15.0  # a replica's drain at SIGTERM, before SIGKILL


def _log(message: str) -> None:
    print(f"[chaos] {message}", file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def _postgres(plan: ChaosPlan, faults: list[str],
                    ) -> AsyncIterator[tuple[str | None, EmbeddedPostgres | None]]:
    """The server every scenario without a pair of its own shares (not started when none
    needs it)."""
    postgres = None
    admin = plan.dsn
    try:
        if admin is None and not all(FAULTS[name].pair for name in faults):
            postgres = EmbeddedPostgres(plan.out / "postgres", settings=dict(FAST_UNSAFE_SETTINGS))
            admin = await asyncio.to_thread(postgres.start)
        yield admin, postgres
    finally:
        if postgres is not None and postgres.started_here:
            await asyncio.to_thread(postgres.stop)
            if not plan.keep_data:  # a server found running in --out is not ours to delete
                _drop_data_directory(postgres.data_dir)


def _drop_data_directory(data_dir: Path) -> None:
    """The shared server's data directory is ~140 MB of a throwaway database: keep its log
    beside the reports (``postgres.log``) and remove the rest, with the linked binaries a
    root run makes beside it."""
    with contextlib.suppress(OSError):
        shutil.copyfile(data_dir / "server.log", data_dir.parent / "postgres.log")
    shutil.rmtree(data_dir, ignore_errors=True)
    shutil.rmtree(data_dir.parent / LINKED_BINARIES, ignore_errors=True)


@contextlib.asynccontextmanager
async def _pair(kind: str | None, out: Path) -> AsyncIterator[EmbeddedPostgresPair | None]:
    """A failover pair for one scenario (failover.py), in a directory of its own: as root
    the servers run as cronwire-pg, which must traverse every parent of their data. The
    servers' logs are kept in ``out``."""
    if kind is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="cronwire-chaos-pair-"))
    pair = EmbeddedPostgresPair(root, synchronous=kind == "sync",
                                base_settings=dict(FAST_UNSAFE_SETTINGS))
    try:
        await asyncio.to_thread(pair.start)
        yield pair
    finally:
        await asyncio.to_thread(pair.stop)
        for server, name in ((pair.primary, "primary"), (pair.standby, "standby")):
            with contextlib.suppress(OSError):
                shutil.copyfile(server.data_dir / "server.log", out / f"postgres-{name}.log")
        shutil.rmtree(root, ignore_errors=True)


@contextlib.asynccontextmanager
async def _broker(plan: ChaosPlan, out: Path) -> AsyncIterator[EmbeddedBroker | None]:
    """A fresh broker per fault, as the database is fresh per fault: a consumer group
    carried over from the faults before (members killed, stopped, restarted) makes tansu
    rebalance it every ~13 s, each time holding every consumer's fetch through a 5 s
    join, and a later fault would measure that instead of the claim."""
    if plan.mode != "kafka":
        yield None
        return
    broker = EmbeddedBroker(out / "broker.log")
    await asyncio.to_thread(broker.start)
    try:
        yield broker
    finally:
        await asyncio.to_thread(broker.stop)


async def _drain(scenario: Scenario, sink: SinkProcess, tenants: list[uuid.UUID], planned: int) -> float:
    """Until the planner has passed the horizon, every run up to it is terminal and the
    sink has seen every planned run (bounded). Returns seconds past the horizon."""
    deadline = time.monotonic() + MAX_DRAIN_SECONDS
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError,
                                 aiohttp.ClientError):
            unplanned = await scenario.pool.fetchval(Q["chaos_unplanned"], tenants, scenario.horizon)
            unfinished = await scenario.pool.fetchval(Q["chaos_unfinished"], tenants, scenario.horizon)
            if unplanned == 0 and unfinished == 0 and await sink.unique(scenario.http) >= planned:
                break
        await asyncio.sleep(0.25)
    counts = {r["status"]: r["n"] for r in await scenario.pool.fetch(Q["chaos_run_counts"], tenants)}
    _log(f"run states: {counts}")
    scenario.figures["run_states"] = counts
    return max(0.0, -scenario.window_left())


async def run_scenario(plan: ChaosPlan, name: str, admin: str | None,
                       postgres: EmbeddedPostgres | None) -> dict[str, Any]:
    out = plan.out / name
    out.mkdir(parents=True, exist_ok=True)
    async with _broker(plan, out) as broker, _pair(FAULTS[name].pair, out) as pair:
        if pair is not None:  # the scenario's own servers: every replica names both
            admin, postgres = pair.dsn(), None
        assert admin is not None
        return await _run_scenario(plan, name, admin, postgres, broker, pair)


async def _run_scenario(plan: ChaosPlan, name: str, admin: str, postgres: EmbeddedPostgres | None,
                        broker: EmbeddedBroker | None,
                        pair: EmbeddedPostgresPair | None) -> dict[str, Any]:
    spec = FAULTS[name]
    out = plan.out / name
    rng = random.Random(f"{plan.seed}/{name}")
    dsn = await fresh_database(admin, f"chaos_{name.replace('-', '_')}_{int(time.time())}")
    pool = await open_pool(dsn, 4)
    sink = SinkProcess(out / "deliveries.jsonl")
    proxy = None
    fleet = Fleet(out / "replicas")
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
        env = replica_env(
            replica_dsn, roles="planner,executor", claim_source=plan.mode,
            executor_workers=spec.workers,
            # Short: leases are 2 x this, so a dead owner's runs come back within seconds.
            delivery_timeout_seconds=spec.delivery_timeout, shutdown_grace_seconds=3,
            db_pool_size=6, log_format="text",
            kafka_bootstrap_servers=broker.bootstrap if broker else None)
        (out / "replicas").mkdir(exist_ok=True)
        for index in range(plan.replicas):
            extra = spec.replica_env(index)
            if spec.victim_proxy and index == 0:  # only the first replica's database path
                extra = dict(extra, SCHEDULER_DATABASE_URL=proxied_dsn)
            fleet.add(f"{name}-{index}", dict(env, **extra))
        await asyncio.gather(*(replica.start() for replica in fleet.replicas))
        tenant_count = 10 if spec.burst else 1
        tenants = [await seed_tenant(pool, f"chaos-{name}-{i}") for i in range(tenant_count)]
        seeded = await seed(pool, spec, plan, sink.base, tenants)
        planned, groups = seeded.planned, seeded.groups
        _log(f"{name}: {len(planned)} runs planned from {seeded.first:%H:%M:%S}Z over "
             f"{plan.duration:.0f}s, {plan.replicas} {plan.mode} replicas")
        scenario = Scenario(plan, spec, pool, http, rng, fleet.replicas, seeded.first,
                            seeded.horizon, postgres, broker, proxy, pair)
        scenario.figures["planned_due"] = planned
        await asyncio.sleep(scenario.seconds_to(0.0))
        await spec.drive(scenario)
        await asyncio.sleep(max(0.0, scenario.window_left()))
        drain = await _drain(scenario, sink, tenants, len(planned))
        if spec.observe is not None:
            await spec.observe(scenario, groups)
        exits = [r.exit_reason() for r in fleet.replicas if not r.running]
    finally:
        for replica in fleet.replicas:
            await replica.stop(STOP_SECONDS)
        await asyncio.to_thread(sink.stop)
        if proxy is not None:
            await proxy.close()
        await http.close()
    try:
        seen = Deliveries.load(out / "deliveries.jsonl")
        figures: dict[str, Any] = count_deliveries(planned, seen, scenario.interruptions)
        figures["drain_seconds"] = round(drain, 2)
        figures["replica_exits"] = len(exits)
        if exits:
            figures["replica_exit_reasons"] = exits
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
        tested_nothing = spec.inconclusive(figures) if spec.inconclusive else None
        figures["inconclusive"] = tested_nothing
        figures["outcome"] = outcome(violations, tested_nothing)
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
    not_run = {name: reason for name in plan.faults
               if (check := FAULTS[name].too_small) and (reason := check(plan))}
    for reason in not_run.values():
        _log(reason)
    started = time.monotonic()
    to_run = [name for name in plan.faults if name not in not_run]
    async with _postgres(plan, to_run) as (admin, postgres):  # admin None: every fault has a pair
        for name in to_run:
            scenarios[name] = await run_scenario(plan, name, admin, postgres)
            _log(f"{name}: {verdict_cell(scenarios[name])}")
    return {
        "mode": plan.mode, "replicas": plan.replicas, "schedules": plan.schedules,
        "duration": plan.duration, "burst": plan.burst, "seed": plan.seed,
        "elapsed_seconds": round(time.monotonic() - started, 1),
        **summary(scenarios, not_run),
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
    for reason in report["not_run"].values():
        print(reason)
    return report
