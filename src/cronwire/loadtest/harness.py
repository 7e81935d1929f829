"""`cronwire loadtest`: real replicas, a real sink and a real Postgres on loopback.

Two scenarios: ``burst`` (every schedule falls due once, at the same instant) and
``steady`` (every schedule fires every second for ``duration`` seconds). The harness
knows from the pure cron maths which occurrences must be delivered, so the receiver's
records alone tell what was delivered, what was delivered twice (a 2xx for an
already-acknowledged ``webhook-id``) and what was lost (a planned occurrence never
acknowledged).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.embedded.postgres import EmbeddedPostgres, free_port
from cronwire.adapters.postgres.sql import parse_queries
from cronwire.composition import Pool, create_tenant, fresh_database, open_pool
from cronwire.domain.cron import occurrences_between
from cronwire.domain.delivery import new_signing_secret
from cronwire.domain.documents import retry_to_document, target_to_document
from cronwire.domain.errors import CronwireError
from cronwire.domain.model import RetryPolicy, Target, idempotency_key_for, run_id_for
from cronwire.loadtest.cpu import cpu_seconds, per_run_us
from cronwire.loadtest.progress import Progress
from cronwire.loadtest.report import Baselines, Report, build_report, write_chart

Q = parse_queries((Path(__file__).parent / "loadtest.sql").read_text(encoding="utf-8"))
MAX_DRAIN_SECONDS = 600.0
# What a run leaves in --out besides the reports; removed unless --keep-data.
DATA_ENTRIES = ("postgres", "broker.log", "replicas", "deliveries.jsonl", "bound-http.jsonl",
                "pgqueuer.jsonl", "baselines")


class LoadTestError(CronwireError):
    """The load test could not run (a process would not start, a baseline failed)."""


@dataclass(frozen=True, slots=True)
class LoadTestPlan:
    mode: str
    schedules: int
    replicas: int
    duration: float
    out: Path
    scenario: str = "steady"
    cron: str = "* * * * * *"
    workers: int = 256
    dsn: str | None = None
    sink_latency_ms: float = 0.0
    sink_failure_rate: float = 0.0
    compare: bool = False
    keep_data: bool = False
    kafka_bootstrap: str | None = None  # kafka mode on the user's broker, else the embedded one

    def warmup_seconds(self) -> float:
        """From seeding to the first instant: the replicas' planner must have written
        every run before it, so the lag measured is the executor's. A burst's schedules
        fire once, so the idle planner writes them up to a minute early (ADR 0023), at
        about 10,000 runs/s on two cores: 100,000 need about 10 s, after the seeding and
        the replicas' start, which this also covers."""
        return 7.0 + self.schedules / 5_000


@dataclass
class _Sink:
    proc: subprocess.Popen[bytes]
    port: int
    records: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


@dataclass
class _Fleet:
    replicas: list[subprocess.Popen[bytes]] = field(default_factory=list)


def _log(message: str) -> None:
    print(f"[loadtest] {message}", file=sys.stderr, flush=True)


def _wait_http(url: str, seconds: float, proc: subprocess.Popen[bytes], what: str,
               log: Path | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LoadTestError(f"{what} exited with {proc.returncode} before answering"
                                + (f": {_last_line(log)}" if log else ""))
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        time.sleep(0.05)
    raise LoadTestError(f"{what} did not answer {url} within {seconds:g}s")


def _last_line(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def sink_stats(port: int, timeout: float = 5.0) -> dict[str, float | None]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stats", timeout=timeout) as response:
        stats: dict[str, float | None] = json.load(response)
        return stats


class SinkWatch:
    """The sink's /_stats, read while the sink is at full load. A sink busy with hundreds
    of connections (three replicas' burst) can leave one stats request unanswered for
    seconds; that is no reason to abandon the run, so the last answer stands in until
    the sink has been silent for ``patience`` seconds or its process has exited."""

    def __init__(self, port: int, proc: subprocess.Popen[bytes] | None = None, *,
                 timeout: float = 5.0, patience: float = 60.0) -> None:
        self._port, self._proc = port, proc
        self._timeout, self._patience = timeout, patience
        self._last: dict[str, float | None] = {}
        self._silent_since: float | None = None

    def read(self) -> dict[str, float | None]:
        try:
            self._last = sink_stats(self._port, self._timeout)
        except (OSError, ValueError) as exc:  # URLError and socket timeouts are OSErrors
            if self._proc is not None and self._proc.poll() is not None:
                raise LoadTestError(f"the sink exited with {self._proc.returncode}") from None
            now = time.monotonic()
            self._silent_since = self._silent_since or now
            if now - self._silent_since >= self._patience:
                raise LoadTestError(
                    f"the sink did not answer /_stats for {self._patience:g}s: {exc}") from None
            return self._last
        self._silent_since = None
        return self._last


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def start_sink(plan: LoadTestPlan, name: str) -> _Sink:
    port = free_port()
    records = plan.out / f"{name}.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronwire.loadtest.sink", "--port", str(port),
         "--out", str(records), "--latency-ms", str(plan.sink_latency_ms),
         "--failure-rate", str(plan.sink_failure_rate)],
        stdin=subprocess.DEVNULL,
    )
    sink = _Sink(proc, port, records)
    _wait_http(f"http://127.0.0.1:{port}/_stats", 20, proc, "the sink")
    return sink


@contextlib.contextmanager
def _servers(plan: LoadTestPlan) -> Iterator[tuple[str, str | None]]:
    """(admin DSN, Kafka bootstrap or None), torn down afterwards."""
    pg = None
    broker = None
    admin_dsn = plan.dsn
    try:
        if admin_dsn is None:
            pg = EmbeddedPostgres(plan.out / "postgres")
            admin_dsn = pg.start()
        if plan.mode == "kafka" and plan.kafka_bootstrap is None:
            broker = EmbeddedBroker(plan.out / "broker.log")
            broker.start()
        yield admin_dsn, broker.bootstrap if broker else plan.kafka_bootstrap
    finally:
        if broker is not None:
            broker.stop()
        if pg is not None:
            pg.stop()


def database_name(prefix: str) -> str:
    return f"{prefix}_{int(time.time())}_{uuid.uuid4().hex[:6]}"


async def _prepare(admin_dsn: str) -> tuple[str, uuid.UUID]:
    """A fresh, migrated database with the load test's tenant: (DSN, tenant id)."""
    dsn = await fresh_database(admin_dsn, database_name("loadtest"))
    pool = await open_pool(dsn, 2)
    try:
        return dsn, await create_tenant(pool, "loadtest")
    finally:
        await pool.close()


async def _seed(dsn: str, plan: LoadTestPlan, tenant_id: uuid.UUID,
                sink: _Sink) -> tuple[list[uuid.UUID], datetime, datetime]:
    """Schedules whose first fire is the first cron instant after the warm-up; returns
    (ids, first instant, last instant). The planner itself stops each at ``ends_at``."""
    pool = await open_pool(dsn, 2)
    try:
        db_now: datetime = await pool.fetchval(Q["loadtest_now"])
        first = occurrences_between(
            plan.cron, "UTC", db_now + timedelta(seconds=plan.warmup_seconds()),
            db_now + timedelta(days=1), 1,
        )[0]
        if plan.scenario == "burst":
            ends_at = first
        else:  # [first, first + duration): duration occurrences of a per-second cron
            ends_at = first + timedelta(seconds=plan.duration) - timedelta(microseconds=1)
        ids = [uuid.uuid4() for _ in range(plan.schedules)]
        target = target_to_document(Target(sink.url))
        retry = retry_to_document(RetryPolicy(5, 1.0, 30.0))
        await pool.execute(
            Q["loadtest_schedules_insert"], ids, tenant_id, plan.cron, target, retry, first,
            ends_at, new_signing_secret(),
        )
        return ids, first, ends_at
    finally:
        await pool.close()


def _start_replicas(fleet: _Fleet, plan: LoadTestPlan, dsn: str, bootstrap: str | None) -> None:
    # The caller's SCHEDULER_DELIVERER is kept, so two deliverers can be compared.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SCHEDULER_") or k == "SCHEDULER_DELIVERER"}
    env.update({
        "SCHEDULER_DATABASE_URL": dsn,
        "SCHEDULER_ROLES": "planner,executor",
        "SCHEDULER_CLAIM_SOURCE": plan.mode,
        "SCHEDULER_ALLOW_PRIVATE_TARGETS": "true",
        "SCHEDULER_EXECUTOR_WORKERS": str(plan.workers),
        "SCHEDULER_AUTO_MIGRATE": "false",
    })
    if bootstrap:  # a topic and group of this run's own (the broker may be the user's)
        run = f"cronwire-loadtest-{dsn.rsplit('/', 1)[-1].split('?')[0]}"
        env.update(SCHEDULER_KAFKA_BOOTSTRAP_SERVERS=bootstrap, SCHEDULER_KAFKA_TOPIC=run,
                   SCHEDULER_KAFKA_CONSUMER_GROUP=run)
    logs = plan.out / "replicas"
    logs.mkdir(exist_ok=True)
    for index in range(plan.replicas):
        port = free_port()
        replica_env = dict(env, SCHEDULER_HTTP_PORT=str(port), SCHEDULER_INSTANCE_ID=f"replica-{index}")
        log_path = logs / f"replica-{index}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cronwire.cli", "serve"], env=replica_env,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        fleet.replicas.append(proc)
        _wait_http(f"http://127.0.0.1:{port}/healthz", 60, proc, f"replica {index}", log_path)


async def _watch(dsn: str, tenant_id: uuid.UUID, horizon: datetime, sink: _Sink,
                 progress: Progress, replica_pids: list[int], first: datetime) -> float:
    """Show progress until the planner has passed the horizon and every run up to it is
    terminal; returns seconds from the horizon to the end of the drain. The database is
    asked only after the horizon, so watching costs the replicas nothing before it."""
    pool = await open_pool(dsn, 2)
    try:
        deadline = time.monotonic() + MAX_DRAIN_SECONDS + progress.seconds_to_horizon()
        next_check = 0.0
        last_acknowledged, last_progress = -1, time.monotonic()
        watch = SinkWatch(sink.port, sink.proc)
        cpu_at_first: float | None = None
        while time.monotonic() < deadline:
            if cpu_at_first is None and progress.seconds_to_first() <= 0:
                cpu_at_first = cpu_seconds(replica_pids)
                written = await pool.fetchval(Q["loadtest_materialised"], tenant_id, horizon)
                # The burst's lag is the executor's only if the planner was done by now.
                _log(f"at the first instant the planner had written {written:,} of "
                     f"{progress.planned:,} runs")
            stats = watch.read()
            progress.show(stats)
            past = progress.seconds_to_horizon() <= 0
            acknowledged = int(stats.get("unique") or 0)
            if acknowledged != last_acknowledged:
                last_acknowledged, last_progress = acknowledged, time.monotonic()
            # Ask the database once every due run is acknowledged, or while acknowledgements
            # have stalled for 2 s (retries waiting, runs that end failed). Not on a clock
            # while the sink's count moves: counting 100,000 rows costs Postgres ~0.1 s, the
            # same core the replicas under test use.
            stalled = time.monotonic() - last_progress >= 2.0
            if past and (progress.backlog(stats) <= 0
                         or (stalled and time.monotonic() >= next_check)):
                next_check = time.monotonic() + 2.0
                unplanned = await pool.fetchval(Q["loadtest_unplanned"], tenant_id, horizon)
                unfinished = await pool.fetchval(Q["loadtest_unfinished"], tenant_id, horizon)
                if unplanned == 0 and unfinished == 0:
                    break
            to_first = progress.seconds_to_first()
            await asyncio.sleep(0.25 if past else min(1.0, to_first) if to_first > 0 else 1.0)
        final = watch.read()
        progress.done(final)
        cpu = per_run_us(cpu_at_first, cpu_seconds(replica_pids), int(final.get("unique") or 0))
        if cpu is not None:
            _log(f"cronwire: {cpu:,.0f} µs of replica CPU per delivered run, first instant "
                 "to the end of the drain")
        await _planner_lead(pool, tenant_id, first)
        db_now: datetime = await pool.fetchval(Q["loadtest_now"])
        counts = {r["status"]: r["n"] for r in await pool.fetch(Q["loadtest_run_counts"], tenant_id, horizon)}
        _log(f"run states up to the horizon: {counts}")
        return max(0.0, (db_now - horizon).total_seconds())
    finally:
        await pool.close()


async def _planner_lead(pool: Pool, tenant_id: uuid.UUID, first: datetime) -> None:
    """Log how long before the first instant the planner wrote that instant's last run.
    (Logged only: the JSON line and report.json hold exactly CONTRACT.md's keys.)"""
    last: datetime | None = await pool.fetchval(Q["loadtest_last_planned_at"], tenant_id, first)
    if last is None:
        return
    lead = (first - last).total_seconds()
    when = f"{lead:.2f} s before" if lead >= 0 else f"{-lead:.2f} s after"
    _log(f"planner wrote the first instant's last run {when} the instant")


def _run_cronwire(plan: LoadTestPlan, admin_dsn: str, bootstrap: str | None,
                  ) -> tuple[dict[str, datetime], Path, float]:
    """(planned webhook-id -> instant, the sink's records, drain seconds)."""
    dsn, tenant_id = asyncio.run(_prepare(admin_dsn))
    sink = start_sink(plan, "deliveries")
    fleet = _Fleet()
    try:
        _log(f"starting {plan.replicas} {plan.mode} replica{'s' if plan.replicas != 1 else ''}")
        _start_replicas(fleet, plan, dsn, bootstrap)
        schedule_ids, first, horizon = asyncio.run(_seed(dsn, plan, tenant_id, sink))
        occurrences = occurrences_between(plan.cron, "UTC", first - timedelta(microseconds=1),
                                          horizon, 1_000_000)
        planned = {idempotency_key_for(run_id_for(sid, at)): at
                   for sid in schedule_ids for at in occurrences}
        _log(f"{plan.scenario}: {plan.schedules} schedules x {len(occurrences)} occurrences "
             f"from {first:%H:%M:%S}Z")
        progress = Progress([at.timestamp() for at in occurrences], plan.schedules)
        drain = asyncio.run(_watch(dsn, tenant_id, horizon, sink, progress,
                                   [proc.pid for proc in fleet.replicas], first))
    finally:
        for replica in fleet.replicas:
            _stop(replica)
        _stop(sink.proc)
    return planned, sink.records, drain


def run_loadtest(plan: LoadTestPlan) -> Report:
    plan.out.mkdir(parents=True, exist_ok=True)
    baselines: Baselines | None = None
    with _servers(plan) as (admin_dsn, bootstrap):
        planned, records, drain = _run_cronwire(plan, admin_dsn, bootstrap)
        if plan.compare:
            from cronwire.loadtest.compare import measure_baselines

            baselines = measure_baselines(plan, admin_dsn, len(planned))
    report = build_report(plan.mode, plan.scenario, plan.schedules, plan.replicas, planned,
                          records, drain, baselines)
    (plan.out / "report.json").write_text(json.dumps(report.summary, indent=2))
    write_chart(report, plan.out / "report.png")
    if not plan.keep_data:
        _keep_only_reports(plan.out)
    return report


def _keep_only_reports(out: Path) -> None:
    """Remove what this run created besides the reports (the Postgres data directory
    alone is ~70 MB); anything else in --out is not ours to delete."""
    for name in DATA_ENTRIES:
        entry = out / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
