"""Watching a load test: the progress line while it runs, the database asked only once
the horizon has passed (so watching costs the replicas nothing before it), and the end
of the drain."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime
from pathlib import Path

from cronwire.bootstrap.factories import Pool, harness_queries, open_pool
from cronwire.harness.seeding import db_now
from cronwire.harness.stats import cpu_seconds, machine_busy_seconds, server_cpu_seconds
from cronwire.loadtest.progress import Progress
from cronwire.loadtest.report import Costs
from cronwire.loadtest.setup import note
from cronwire.loadtest.sinks import LoadSink
from cronwire.loadtest.statements import heaviest, start_counting
from cronwire.loadtest.waits import Samples, sample_waits, wait_lines
from cronwire.loadtest.wal import WalMark, wal_mark, wal_since

Q = harness_queries(Path(__file__).with_name("loadtest.sql"))
MAX_DRAIN_SECONDS = 600.0


def _used(before: float | None, pids: list[int]) -> float | None:
    after = cpu_seconds(pids)
    return None if before is None or after is None else after - before


async def watch(dsn: str, tenant_id: uuid.UUID, horizon: datetime, sink: LoadSink,
                 progress: Progress, replica_pids: list[int], first: datetime,
                 postgres_pid: int | None = None,
                 statements: bool = False) -> tuple[float, Costs]:
    """Show progress until the planner has passed the horizon and every run up to it is
    terminal; returns (seconds from the horizon to the end of the drain, the CPU the
    replicas, the sink and Postgres (``postgres_pid``: its postmaster, when it is ours)
    used from the first instant on). The database is asked only after the horizon, so
    watching costs the replicas nothing before it. With ``statements`` (the server loads
    pg_stat_statements), the heaviest statements of the same window are logged."""
    pool = await open_pool(dsn, 2)
    sampling_done = asyncio.Event()
    sampler: asyncio.Task[Samples] | None = None
    try:
        deadline = time.monotonic() + MAX_DRAIN_SECONDS + progress.seconds_to_horizon()
        next_check = 0.0
        last_acknowledged, last_progress = -1, time.monotonic()
        cpu_at_first: float | None = None
        sink_pids: list[int] = []
        sink_cpu_at_first: float | None = None
        postgres_cpu_at_first: float | None = None
        wal_at_first: WalMark | None = None
        machine_at_first: float | None = None
        first_seen = 0.0
        while time.monotonic() < deadline:
            if cpu_at_first is None and progress.seconds_to_first() <= 0:
                cpu_at_first = cpu_seconds(replica_pids)
                machine_at_first, first_seen = machine_busy_seconds(), time.monotonic()
                sink_pids = sink.pids()
                sink_cpu_at_first = cpu_seconds(sink_pids)
                if postgres_pid is not None:
                    postgres_cpu_at_first = server_cpu_seconds(postgres_pid)
                    wal_at_first = await wal_mark(pool)
                if statements:
                    await start_counting(pool)
                    sampler = asyncio.create_task(sample_waits(dsn, sampling_done))
                # Nothing is asked of the database here: the count of what the planner
                # had written by now is read after the drain (a count of the burst's rows
                # at this instant cost Postgres ~85 ms, billed to the burst).
                note("the first instant: CPU and WAL are counted from here")
            stats = sink.stats()
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
        machine = machine_busy_seconds()
        sampling_done.set()
        window = time.monotonic() - first_seen if cpu_at_first is not None else None
        postgres_cpu = (server_cpu_seconds(postgres_pid)
                        if postgres_pid is not None and postgres_cpu_at_first is not None
                        else None)
        costs = Costs(_used(cpu_at_first, replica_pids), _used(sink_cpu_at_first, sink_pids),
                      sink.kind,
                      None if postgres_cpu is None or postgres_cpu_at_first is None
                      else postgres_cpu - postgres_cpu_at_first,
                      None if wal_at_first is None else await wal_since(pool, wal_at_first),
                      None if machine is None or machine_at_first is None
                      else machine - machine_at_first, window)
        final = sink.stats()
        progress.show(final)  # the last sample; the closing line waits for the report
        if statements:
            for line in await heaviest(pool, int(final.get("unique") or 0)):
                note(f"statement {line}")
            if sampler is not None:
                for line in wait_lines(await sampler):
                    note(f"waits: {line}")
        # The burst's lag is the executor's only if the planner was done by the first instant.
        written = await pool.fetchval(Q["loadtest_materialised"], tenant_id, horizon, first)
        note(f"at the first instant the planner had written {written:,} of "
             f"{progress.planned:,} runs")
        await _planner_lead(pool, tenant_id, first)
        now = await db_now(pool)
        counts = {r["status"]: r["n"] for r in await pool.fetch(Q["loadtest_run_counts"], tenant_id, horizon)}
        note(f"run states up to the horizon: {counts}")
        return max(0.0, (now - horizon).total_seconds()), costs
    finally:
        sampling_done.set()
        if sampler is not None and not sampler.done():
            sampler.cancel()
        await pool.close()


async def _planner_lead(pool: Pool, tenant_id: uuid.UUID, first: datetime) -> None:
    """Log how long before the first instant the planner wrote that instant's last run.
    (Logged only: the JSON line and report.json hold exactly CONTRACT.md's keys.)"""
    last: datetime | None = await pool.fetchval(Q["loadtest_last_planned_at"], tenant_id, first)
    if last is None:
        return
    lead = (first - last).total_seconds()
    when = f"{lead:.2f} s before" if lead >= 0 else f"{-lead:.2f} s after"
    note(f"planner wrote the first instant's last run {when} the instant")
