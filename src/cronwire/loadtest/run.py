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
import json
import os
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

from cronwire.bootstrap.embedded import LINKED_BINARIES, EmbeddedPostgres
from cronwire.domain.cron import occurrences_between
from cronwire.domain.jitter import jittered
from cronwire.domain.model import idempotency_key_for, run_id_for
from cronwire.harness.fleet import Fleet
from cronwire.harness.stats import per_run_us
from cronwire.loadtest.baselines import PGQ_CONFIGS
from cronwire.loadtest.plan import LoadTestPlan
from cronwire.loadtest.progress import Progress
from cronwire.loadtest.report import Baselines, Costs, Report, build_report, write_chart
from cronwire.loadtest.setup import note, prepare, seed, servers, start_replicas
from cronwire.loadtest.sinks import start_sink
from cronwire.loadtest.wal import wal_note
from cronwire.loadtest.watch import watch

# What a run leaves in --out besides the reports; removed unless --keep-data. A sink's
# records are NAME.jsonl (the Python sink) or the directory NAME (nginx's).
DATA_ENTRIES = ("postgres", LINKED_BINARIES, "broker.log", "replicas", "baselines",
                *(f"{name}{suffix}" for name in ("deliveries", "aiohttp-http", "pgqueuer")
                  for suffix in (".jsonl", "")),
                # --compare's sinks, one per configuration of pgqueuer it tries
                *dict.fromkeys(f"{config.sink_name}{suffix}" for config in PGQ_CONFIGS
                               for suffix in (".jsonl", "")))


STOP_SECONDS = 30.0  # a process's drain at SIGTERM, before SIGKILL


async def _run_cronwire(
    plan: LoadTestPlan, admin_dsn: str, bootstrap: str | None,
) -> tuple[dict[str, datetime], list[tuple[str, float]], float, Costs, Progress]:
    """(planned webhook-id -> instant, the sink's acknowledgements, drain seconds, CPU,
    the progress line to close)."""
    dsn, tenant_id = await prepare(admin_dsn)
    note(f"sink: {plan.sink}" + (" (answers 200 at once; its access log is the record)"
                                 if plan.sink == "nginx" else ""))
    sink = await start_sink(plan, "deliveries")
    fleet = Fleet(plan.out / "replicas")
    try:
        note(f"starting {plan.replicas} {plan.mode} replica{'s' if plan.replicas != 1 else ''}")
        await start_replicas(fleet, plan, dsn, bootstrap)
        schedule_ids, first, horizon = await seed(dsn, plan, tenant_id, sink.url)
        occurrences = occurrences_between(plan.cron, "UTC", first - timedelta(microseconds=1),
                                          horizon, 1_000_000)
        # Each delivery is due at its fire_after: the occurrence plus its jitter (none: the
        # occurrence itself), which is what the lag is measured from.
        planned = {idempotency_key_for(run_id_for(sid, at)): jittered(sid, at, plan.jitter_seconds)
                   for sid in schedule_ids for at in occurrences}
        note(f"{plan.scenario}: {plan.schedules} schedules x {len(occurrences)} occurrences "
             f"from {first:%H:%M:%S}Z"
             + (f", jitter {plan.jitter_seconds} s (lag from each fire_after)"
                if plan.jitter_seconds else ""))
        progress = Progress([at.timestamp() for at in occurrences], plan.schedules)
        pids = [replica.proc.pid for replica in fleet.replicas if replica.proc is not None]
        drain, costs = await watch(dsn, tenant_id, horizon, sink, progress, pids, first,
                                   _our_postmaster(plan), statements=plan.statements)
    finally:
        for replica in fleet.replicas:
            await replica.stop(STOP_SECONDS)
        await asyncio.to_thread(sink.stop, STOP_SECONDS)
    acknowledgements = list(sink.acknowledgements())
    _note_costs(costs, len(planned.keys() & {webhook_id for webhook_id, _ in acknowledgements}))
    return planned, acknowledgements, drain, costs, progress


def _our_postmaster(plan: LoadTestPlan) -> int | None:
    """The pid of the embedded Postgres this run started (None with --dsn: not ours to
    account for, other work may share it)."""
    if plan.dsn is not None:
        return None
    running = EmbeddedPostgres(plan.out / "postgres").postmaster()
    return running[0] if running is not None else None


def _note_costs(costs: Costs, delivered: int) -> None:
    replica = per_run_us(0.0, costs.replica_seconds, delivered)
    if replica is not None:
        note(f"cronwire: {replica:,.0f} µs of replica CPU per delivered run, first instant "
             "to the end of the drain")
    database = per_run_us(0.0, costs.postgres_seconds, delivered)
    if database is not None:
        note(f"Postgres: {database:,.0f} µs of CPU per delivered run (every process of "
             "the server, same window)")
    wal = None if costs.wal is None else wal_note(costs.wal, delivered)
    if wal is not None:
        note(wal)
    receiver = per_run_us(0.0, costs.sink_seconds, delivered)
    if receiver is not None:
        note(f"the {costs.sink} sink: {receiver:,.0f} µs of CPU per delivered run")
    cores = cores_note(costs, os.cpu_count())
    if cores is not None:
        note(cores)


def cores_note(costs: Costs, cores: int | None) -> str | None:
    """How many of the machine's cores were busy over the window, and how many of them
    the three parties account for: what is neither is idle (a pipeline that waits) or
    someone else's (the harness, the kernel, other work on a shared machine)."""
    busy, window = costs.machine_busy_seconds, costs.window_seconds
    if busy is None or not window or window <= 0 or not cores:
        return None
    line = (f"the machine: {busy / window:.2f} of {cores} cores busy, first instant to the end "
            "of the drain (/proc/stat: every process and the kernel)")
    replicas, postgres, sink = costs.replica_seconds, costs.postgres_seconds, costs.sink_seconds
    if replicas is not None and postgres is not None and sink is not None:
        line += (f"; the replicas {replicas / window:.2f}, Postgres {postgres / window:.2f} "
                 f"and the sink {sink / window:.2f}: {(replicas + postgres + sink) / window:.2f}"
                 " of them")
    return line


def run_loadtest(plan: LoadTestPlan) -> Report:
    plan.out.mkdir(parents=True, exist_ok=True)
    baselines: Baselines | None = None
    with servers(plan) as (admin_dsn, bootstrap):
        planned, acknowledgements, drain, costs, progress = asyncio.run(
            _run_cronwire(plan, admin_dsn, bootstrap))
        if plan.compare:
            from cronwire.loadtest.compare import measure_baselines

            baselines = measure_baselines(plan, admin_dsn, len(planned),
                                          _our_postmaster(plan))
    report = build_report(plan.mode, plan.scenario, plan.schedules, plan.replicas, planned,
                          acknowledgements, drain, baselines, costs)
    summary = report.summary
    progress.done(cast(int, summary["delivered"]), cast(float, summary["runs_per_second"]),
                  cast(float, summary["fire_lag_p99_ms"]))
    (plan.out / "report.json").write_text(json.dumps(summary, indent=2))
    write_chart(report, plan.out / "report.png", jitter_seconds=plan.jitter_seconds)
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
