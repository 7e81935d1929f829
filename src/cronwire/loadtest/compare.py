"""`--compare`: the machine's bound for this job and pgqueuer doing it, in the same
invocation, on the same Postgres server and against the same kind of sink as cronwire.

The bound is 1/(1/db + 1/http): the batched claim + terminal write alone (bound-db), and
C programs doing the HTTP half (wrk posting delivery-sized webhooks to nginx,
http_bound.py). A bare aiohttp client is measured too, for reference; it is the HTTP half
only where wrk or nginx is missing (``bound_http_source`` then says "aiohttp").

Every measured party runs in processes of its own, as cronwire's replicas do.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

from cronwire.bootstrap.factories import blank_database
from cronwire.harness.processes import stop_process
from cronwire.harness.stats import cpu_seconds, per_run_us, server_cpu_seconds
from cronwire.loadtest.baselines import PGQ_CONFIGS, PgqConfig, PgqMeasure, combined_bound
from cronwire.loadtest.http_bound import (
    CONNECTIONS,
    SECONDS,
    http_bound_available,
    measure_http_bound,
)
from cronwire.loadtest.plan import LoadTestError, LoadTestPlan
from cronwire.loadtest.report import Baselines
from cronwire.loadtest.setup import database_name, note
from cronwire.loadtest.sinks import LoadSink, start_sink

BASELINE_TIMEOUT = 900.0
STOP_SECONDS = 30.0


def _baseline(*args: str, log: Path) -> dict[str, float]:
    with log.open("ab") as err:
        done = subprocess.run(
            [sys.executable, "-m", "cronwire.loadtest.baselines", *args],
            stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
            timeout=BASELINE_TIMEOUT, check=False,
        )
    lines = done.stdout.decode().strip().splitlines()
    if done.returncode != 0 or not lines:
        raise LoadTestError(f"baseline {args[0]} failed (exit {done.returncode}); see {log}")
    result: dict[str, float] = json.loads(lines[-1])
    return result


def _started_sink(plan: LoadTestPlan, name: str) -> LoadSink:
    return asyncio.run(start_sink(plan, name))


def _last_ack(sink: LoadSink) -> tuple[int, float]:
    """(acknowledged ids, time of the last acknowledgement) from a sink's records."""
    seen: set[str] = set()
    last = 0.0
    for webhook_id, at in sink.acknowledgements():
        seen.add(webhook_id)
        last = max(last, at)
    return len(seen), last


async def _wait_for(dsn: str, query: str, check: object, seconds: float, what: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if check(await conn.fetchval(query)):  # type: ignore[operator]
                return
            await asyncio.sleep(0.1)
    finally:
        await conn.close()
    raise LoadTestError(f"{what} within {seconds:g}s")


def _pgqueuer(plan: LoadTestPlan, dsn: str, jobs: int, log: Path, config: PgqConfig,
              postmaster: int | None) -> PgqMeasure:
    """pgqueuer in one configuration: its jobs/s from the instant its workers may take the
    jobs (all enqueued) to the sink's last acknowledgement, as cronwire's runs are timed
    from the instant they fall due (all written); and the CPU per acknowledged job of its
    workers, of Postgres (``postmaster``: when the server is ours) and of the sink, from
    that instant to the queue's end, as cronwire's split is measured."""
    sink = _started_sink(plan, config.sink_name)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        _baseline("pgqueuer-enqueue", "--dsn", dsn, "--jobs", "0", log=log)
        with log.open("ab") as err:
            for _ in range(plan.replicas * config.processes):
                workers.append(subprocess.Popen(
                    [sys.executable, "-m", "cronwire.loadtest.baselines", "pgqueuer-worker",
                     "--dsn", dsn, "--sink", sink.url, *config.args()],
                    stdout=err, stderr=err, stdin=subprocess.DEVNULL,
                ))
        database = dsn.rpartition("/")[2].partition("?")[0]
        asyncio.run(_wait_for(
            dsn, f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}' "
            "AND pid <> pg_backend_pid()",
            lambda n: n >= len(workers), 60, "pgqueuer workers did not connect",
        ))
        time.sleep(2.0)  # let each worker finish its start-up and first empty dequeue
        # The workers are stopped while the jobs are enqueued and the CPU read, and the
        # clock starts when they go on: the enqueue's own Postgres work is not theirs, and
        # a small queue would otherwise be drained before its CPU was first read.
        _signal(workers, signal.SIGSTOP)
        try:
            _baseline("pgqueuer-enqueue", "--dsn", dsn, "--jobs", str(jobs), log=log)
            before = _party_cpu(workers, postmaster, sink)
            started = time.time()
        finally:
            _signal(workers, signal.SIGCONT)
        note(f"pgqueuer ({config}): {jobs:,} jobs enqueued; {len(workers)} worker "
             "process(es) at work")
        asyncio.run(_wait_for(
            dsn, "SELECT count(*) FROM pgqueuer", lambda n: n == 0, BASELINE_TIMEOUT,
            "pgqueuer did not finish its jobs",
        ))
        after = _party_cpu(workers, postmaster, sink)
    finally:
        for worker in workers:
            stop_process(worker, STOP_SECONDS)
        sink.stop(STOP_SECONDS)
    acked, last = _last_ack(sink)
    if acked < jobs:
        note(f"pgqueuer: only {acked:,} of {jobs:,} jobs were acknowledged by the sink")
    worker_us, postgres_us, sink_us = (per_run_us(b, a, acked)
                                       for b, a in zip(before, after, strict=True))
    measure = PgqMeasure(config, acked / max(last - started, 1e-9), worker_us,
                         postgres_us, sink_us)
    if measure.cpu_note():
        note(f"pgqueuer: {measure.cpu_note()}")
    return measure


def _signal(workers: list[subprocess.Popen[bytes]], signum: signal.Signals) -> None:
    for worker in workers:
        if worker.poll() is None:
            os.kill(worker.pid, signum)


def _party_cpu(workers: list[subprocess.Popen[bytes]], postmaster: int | None,
               sink: LoadSink) -> tuple[float | None, float | None, float | None]:
    """CPU seconds so far of pgqueuer's workers, Postgres's processes and the sink's."""
    return (cpu_seconds(w.pid for w in workers),
            server_cpu_seconds(postmaster) if postmaster is not None else None,
            cpu_seconds(sink.pids()))


def _aiohttp_http(plan: LoadTestPlan, jobs: int, log: Path) -> float:
    """A bare aiohttp client's POSTs/s to the plan's sink: for reference (the bound's HTTP
    half before C programs measured it)."""
    note(f"--compare: for reference, {jobs:,} POSTs from a bare aiohttp client to the "
         f"{plan.sink} sink")
    sink = _started_sink(plan, "aiohttp-http")
    try:
        measured = _baseline("aiohttp-http", "--sink", sink.url, "--jobs", str(jobs),
                             "--workers", str(plan.workers), log=log)
    finally:
        sink.stop(STOP_SECONDS)
    note(f"--compare: aiohttp {measured['runs_per_second']:,.0f} POSTs/s, "
         f"{measured['cpu_us_per_run']:,.0f} µs of client CPU per POST")
    return measured["runs_per_second"]


def _wrk_nginx(plan: LoadTestPlan) -> tuple[float | None, str | None]:
    """(requests/s of wrk to nginx, None) or (None, why not)."""
    if not http_bound_available():
        return None, "wrk or nginx is not installed; the HTTP half is the aiohttp client's"
    note(f"--compare: the bound's HTTP half: wrk, {CONNECTIONS} connections, delivery-sized "
         f"POSTs to nginx for {SECONDS:g} s")
    try:
        measured = measure_http_bound(plan.out / "baselines" / "wrk")
    except (LoadTestError, OSError) as exc:
        return None, f"wrk to nginx failed ({exc}); the HTTP half is the aiohttp client's"
    note(f"--compare: wrk to nginx {measured.per_second:,.0f} requests/s")
    return measured.per_second, None


def measure_baselines(plan: LoadTestPlan, admin_dsn: str, jobs: int,
                      postmaster: int | None = None) -> Baselines:
    """The bound and pgqueuer at its best; ``postmaster``: the embedded Postgres's pid,
    when the load test started it (pgqueuer's Postgres CPU per job is measured then)."""
    log = plan.out / "baselines" / "baselines.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    note(f"--compare: the bound's database half ({jobs:,} claims and terminal writes)")
    bound_dsn = asyncio.run(blank_database(admin_dsn, database_name("bound")))
    db = _baseline("bound-db", "--dsn", bound_dsn, "--jobs", str(jobs), log=log)["runs_per_second"]
    http, why_not = _wrk_nginx(plan)
    aiohttp = _aiohttp_http(plan, jobs, log)
    if http is None:
        note(f"--compare: {why_not}")
    source = "wrk+nginx" if http is not None else "aiohttp"
    http = http if http is not None else aiohttp
    ceiling = combined_bound(db, http)
    note(f"--compare: bound = 1/(1/{db:,.0f} + 1/{http:,.0f} ({source})) = {ceiling:,.0f} "
         "runs/s; now pgqueuer on the same job")
    swept: list[PgqMeasure] = []
    for n, config in enumerate(PGQ_CONFIGS):
        pgq_dsn = asyncio.run(blank_database(admin_dsn, database_name(f"pgqueuer{n}")))
        swept.append(_pgqueuer(plan, pgq_dsn, jobs, log, config, postmaster))
        note(f"--compare: pgqueuer ({config}) {swept[-1].jobs_per_second:,.0f} jobs/s")
    best = max(swept, key=lambda m: m.jobs_per_second)
    note(f"--compare: pgqueuer at its best: {best.jobs_per_second:,.0f} jobs/s ({best.config})")
    return Baselines(bound_db=db, bound_http=http, ceiling=ceiling,
                     pgqueuer=best.jobs_per_second, aiohttp_http=aiohttp,
                     bound_http_source=source, bound_http_note=why_not,
                     pgqueuer_config=str(best.config),
                     pgqueuer_sweep=tuple((str(m.config), round(m.jobs_per_second, 1))
                                          for m in swept),
                     pgqueuer_cpu_us_per_job=best.split())
