"""`--compare`: the machine's bound for this job and pgqueuer doing it, in the same
invocation, on the same Postgres server and against the same kind of sink as cronwire.

Every measured party runs in processes of its own, as cronwire's replicas do.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

from cronwire.bootstrap.factories import blank_database
from cronwire.harness.processes import stop_process
from cronwire.harness.stats import cpu_seconds, per_run_us
from cronwire.loadtest.baselines import combined_bound
from cronwire.loadtest.plan import LoadTestError, LoadTestPlan
from cronwire.loadtest.report import Baselines
from cronwire.loadtest.setup import database_name, note, start_sink

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


def _last_ack(records: Path) -> tuple[int, float]:
    """(acknowledged ids, time of the last acknowledgement) from a sink's records."""
    seen: set[str] = set()
    last = 0.0
    if records.exists():
        for line in records.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            seen.add(record["id"])
            last = max(last, float(record["at"]))
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


def _pgqueuer(plan: LoadTestPlan, dsn: str, jobs: int, log: Path) -> float:
    sink = start_sink(plan, "pgqueuer")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        _baseline("pgqueuer-enqueue", "--dsn", dsn, "--jobs", "0", log=log)
        with log.open("ab") as err:
            for _ in range(plan.replicas):
                workers.append(subprocess.Popen(
                    [sys.executable, "-m", "cronwire.loadtest.baselines", "pgqueuer-worker",
                     "--dsn", dsn, "--sink", sink.url],
                    stdout=err, stderr=err, stdin=subprocess.DEVNULL,
                ))
        database = dsn.rpartition("/")[2].partition("?")[0]
        asyncio.run(_wait_for(
            dsn, f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}' "
            "AND pid <> pg_backend_pid()",
            lambda n: n >= plan.replicas, 60, "pgqueuer workers did not connect",
        ))
        time.sleep(2.0)  # let each worker finish its start-up and first empty dequeue
        visible_at = _baseline("pgqueuer-enqueue", "--dsn", dsn, "--jobs", str(jobs),
                               log=log)["visible_at"]
        cpu_before = cpu_seconds(w.pid for w in workers)
        note(f"pgqueuer: {jobs:,} jobs enqueued; {plan.replicas} worker process(es) at work")
        asyncio.run(_wait_for(
            dsn, "SELECT count(*) FROM pgqueuer", lambda n: n == 0, BASELINE_TIMEOUT,
            "pgqueuer did not finish its jobs",
        ))
        cpu = per_run_us(cpu_before, cpu_seconds(w.pid for w in workers), jobs)
        if cpu is not None:
            note(f"pgqueuer: {cpu:,.0f} µs of worker CPU per job")
    finally:
        for worker in workers:
            stop_process(worker, STOP_SECONDS)
        sink.stop(STOP_SECONDS)
    assert sink.out is not None
    acked, last = _last_ack(sink.out)
    if acked < jobs:
        note(f"pgqueuer: only {acked:,} of {jobs:,} jobs were acknowledged by the sink")
    return acked / max(last - float(visible_at), 1e-9)


def measure_baselines(plan: LoadTestPlan, admin_dsn: str, jobs: int) -> Baselines:
    log = plan.out / "baselines" / "baselines.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    note(f"--compare: the bound's database half ({jobs:,} claims and terminal writes)")
    bound_dsn = asyncio.run(blank_database(admin_dsn, database_name("bound")))
    db = _baseline("bound-db", "--dsn", bound_dsn, "--jobs", str(jobs), log=log)["runs_per_second"]
    note(f"--compare: the bound's HTTP half ({jobs:,} bare aiohttp POSTs)")
    sink = start_sink(plan, "bound-http")
    try:
        measured = _baseline("bound-http", "--sink", sink.url, "--jobs", str(jobs),
                             "--workers", str(plan.workers), log=log)
        http, http_cpu = measured["runs_per_second"], measured["cpu_us_per_run"]
    finally:
        sink.stop(STOP_SECONDS)
    ceiling = combined_bound(db, http)
    note(f"--compare: bare aiohttp used {http_cpu:,.0f} µs of CPU per POST")
    note(f"--compare: bound = 1/(1/{db:,.0f} + 1/{http:,.0f}) = {ceiling:,.0f} runs/s; "
         f"now pgqueuer on the same job")
    pgq_dsn = asyncio.run(blank_database(admin_dsn, database_name("pgqueuer")))
    pgq = _pgqueuer(plan, pgq_dsn, jobs, log)
    note(f"--compare: pgqueuer {pgq:,.0f} jobs/s")
    return Baselines(bound_db=db, bound_http=http, ceiling=ceiling, pgqueuer=pgq)
