"""`cronwire loadtest`: real replicas, a real sink and a real Postgres on loopback.

Every schedule fires at the same instants. The harness knows from the pure cron maths
which occurrences must be delivered, so the receiver's records alone tell what was
delivered, what was delivered twice (a 2xx for an already-acknowledged ``webhook-id``)
and what was lost (a planned occurrence never acknowledged).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.embedded.postgres import EmbeddedPostgres, free_port
from cronwire.adapters.postgres.migrator import migrate
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.sql import queries
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.domain.cron import occurrences_between
from cronwire.domain.delivery import new_signing_secret
from cronwire.domain.model import idempotency_key_for, run_id_for
from cronwire.loadtest.report import Report, build_report, write_chart

Q = queries("loadtest")
WARMUP_SECONDS = 8.0
MAX_DRAIN_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class LoadTestPlan:
    mode: str
    schedules: int
    replicas: int
    duration: float
    out: Path
    cron: str = "*/5 * * * * *"
    workers: int = 256
    dsn: str | None = None


@dataclass
class _Fleet:
    sink: subprocess.Popen[bytes]
    sink_port: int
    replicas: list[subprocess.Popen[bytes]]


def _log(message: str) -> None:
    print(f"[loadtest] {message}", file=sys.stderr, flush=True)


def _wait_http(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {seconds}s")


def _sink_unique(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stats", timeout=5) as response:
        return int(json.load(response)["unique"])


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def _servers(plan: LoadTestPlan) -> Iterator[tuple[str, str | None]]:
    """(DSN of a fresh database, Kafka bootstrap or None), torn down afterwards."""
    pg = None
    broker = None
    admin_dsn = plan.dsn
    if admin_dsn is None:
        pg = EmbeddedPostgres(plan.out / "postgres")
        admin_dsn = pg.start()
    if plan.mode == "kafka":
        broker = EmbeddedBroker(plan.out / "broker.log")
        broker.start()
    database = f"loadtest_{int(time.time())}"

    async def create() -> None:
        conn = await asyncpg.connect(admin_dsn)
        try:
            await conn.execute(f'CREATE DATABASE "{database}"')
        finally:
            await conn.close()

    asyncio.run(create())
    base, _, _ = admin_dsn.rpartition("/")
    try:
        yield f"{base}/{database}", broker.bootstrap if broker else None
    finally:
        if broker is not None:
            broker.stop()
        if pg is not None:
            pg.stop()


async def _seed(dsn: str, plan: LoadTestPlan, sink_port: int) -> tuple[uuid.UUID, list[uuid.UUID], datetime]:
    """Tenant + schedules whose first fire is the first cron instant after the warm-up and
    whose ``ends_at`` is ``duration`` seconds later."""
    await migrate(dsn)
    pool = await create_pool(dsn, 2)
    try:
        tenant = await PostgresTenantStore(pool).create("loadtest")
        db_now: datetime = await pool.fetchval(Q["loadtest_now"])
        first = occurrences_between(
            plan.cron, "UTC", db_now + timedelta(seconds=WARMUP_SECONDS), db_now + timedelta(days=1), 1
        )[0]
        ids = [uuid.uuid4() for _ in range(plan.schedules)]
        target: dict[str, object] = {"url": f"http://127.0.0.1:{sink_port}/hook", "method": "POST", "headers": {}, "body": None}
        retry = {"max_attempts": 5, "initial_backoff_seconds": 1, "max_backoff_seconds": 30}
        await pool.execute(
            Q["loadtest_schedules_insert"], ids, tenant.tenant_id, plan.cron, target, retry, first,
            first + timedelta(seconds=plan.duration), new_signing_secret(),
        )
        return tenant.tenant_id, ids, first
    finally:
        await pool.close()


def _start_sink(plan: LoadTestPlan) -> _Fleet:
    sink_port = free_port()
    sink = subprocess.Popen(
        [sys.executable, "-m", "cronwire.loadtest.sink", "--port", str(sink_port),
         "--out", str(plan.out / "deliveries.jsonl")],
        stdin=subprocess.DEVNULL,
    )
    _wait_http(f"http://127.0.0.1:{sink_port}/_stats", 20)
    return _Fleet(sink, sink_port, [])


def _start_replicas(fleet: _Fleet, plan: LoadTestPlan, dsn: str, bootstrap: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
    env.update({
        "SCHEDULER_DATABASE_URL": dsn,
        "SCHEDULER_ROLES": "planner,executor",
        "SCHEDULER_CLAIM_SOURCE": plan.mode,
        "SCHEDULER_ALLOW_PRIVATE_TARGETS": "true",
        "SCHEDULER_EXECUTOR_WORKERS": str(plan.workers),
        "SCHEDULER_AUTO_MIGRATE": "false",
    })
    if bootstrap:
        env["SCHEDULER_KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    logs = plan.out / "replicas"
    logs.mkdir(exist_ok=True)
    for index in range(plan.replicas):
        port = free_port()
        replica_env = dict(env, SCHEDULER_HTTP_PORT=str(port), SCHEDULER_INSTANCE_ID=f"replica-{index}")
        with (logs / f"replica-{index}.log").open("wb") as log:
            fleet.replicas.append(subprocess.Popen(
                [sys.executable, "-m", "cronwire.cli", "serve"], env=replica_env,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            ))
        _wait_http(f"http://127.0.0.1:{port}/healthz", 30)


async def _drain(dsn: str, tenant_id: uuid.UUID, horizon: datetime, fleet: _Fleet, planned: int) -> float:
    """Wait until the planner has passed the horizon and every run up to it is terminal.
    Returns seconds from the horizon to the end of the drain."""
    pool = await create_pool(dsn, 2)
    try:
        deadline = time.monotonic() + MAX_DRAIN_SECONDS
        while time.monotonic() < deadline:
            unplanned = await pool.fetchval(Q["loadtest_unplanned"], tenant_id, horizon)
            unfinished = await pool.fetchval(Q["loadtest_unfinished"], tenant_id, horizon)
            if unplanned == 0 and unfinished == 0 and _sink_unique(fleet.sink_port) >= planned:
                break
            await asyncio.sleep(0.2)
        db_now: datetime = await pool.fetchval(Q["loadtest_now"])
        counts = {r["status"]: r["n"] for r in await pool.fetch(Q["loadtest_run_counts"], tenant_id, horizon)}
        _log(f"run states up to the horizon: {counts}")
        return max(0.0, (db_now - horizon).total_seconds())
    finally:
        await pool.close()


def run_loadtest(plan: LoadTestPlan) -> Report:
    plan.out.mkdir(parents=True, exist_ok=True)
    with _servers(plan) as (dsn, bootstrap):
        fleet = _start_sink(plan)
        try:
            tenant_id, schedule_ids, first = asyncio.run(_seed(dsn, plan, fleet.sink_port))
            horizon = first + timedelta(seconds=plan.duration)
            occurrences = occurrences_between(plan.cron, "UTC", first - timedelta(microseconds=1), horizon, 1_000_000)
            planned = {
                idempotency_key_for(run_id_for(sid, at)): at for sid in schedule_ids for at in occurrences
            }
            _log(f"{plan.schedules} schedules x {len(occurrences)} occurrences from {first:%H:%M:%S}Z; "
                 f"starting {plan.replicas} {plan.mode} replicas")
            _start_replicas(fleet, plan, dsn, bootstrap)
            wait = (horizon - datetime.now(first.tzinfo)).total_seconds()
            time.sleep(max(0.0, wait))
            drain = asyncio.run(_drain(dsn, tenant_id, horizon, fleet, len(planned)))
        finally:
            for replica in fleet.replicas:
                _stop(replica)
            _stop(fleet.sink)
    report = build_report(plan.mode, plan.schedules, plan.replicas, planned,
                          plan.out / "deliveries.jsonl", drain)
    (plan.out / "report.json").write_text(json.dumps(report.summary, indent=2))
    write_chart(report, plan.out / "report.png")
    return report
