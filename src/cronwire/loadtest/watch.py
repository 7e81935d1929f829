"""Watching a load test: the progress line while it runs, the database asked only once
the horizon has passed (so watching costs the replicas nothing before it), and the end
of the drain."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path

from cronwire.bootstrap.factories import Pool, harness_queries, open_pool
from cronwire.harness.seeding import db_now
from cronwire.harness.sink_process import SinkProcess
from cronwire.harness.stats import cpu_seconds, per_run_us
from cronwire.loadtest.plan import LoadTestError
from cronwire.loadtest.progress import Progress
from cronwire.loadtest.setup import note

Q = harness_queries(Path(__file__).with_name("loadtest.sql"))
MAX_DRAIN_SECONDS = 600.0


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


async def watch(dsn: str, tenant_id: uuid.UUID, horizon: datetime, sink: SinkProcess,
                 progress: Progress, replica_pids: list[int], first: datetime) -> float:
    """Show progress until the planner has passed the horizon and every run up to it is
    terminal; returns seconds from the horizon to the end of the drain. The database is
    asked only after the horizon, so watching costs the replicas nothing before it."""
    pool = await open_pool(dsn, 2)
    try:
        deadline = time.monotonic() + MAX_DRAIN_SECONDS + progress.seconds_to_horizon()
        next_check = 0.0
        last_acknowledged, last_progress = -1, time.monotonic()
        sink_watch = SinkWatch(sink.port, sink.proc)
        cpu_at_first: float | None = None
        while time.monotonic() < deadline:
            if cpu_at_first is None and progress.seconds_to_first() <= 0:
                cpu_at_first = cpu_seconds(replica_pids)
                written = await pool.fetchval(Q["loadtest_materialised"], tenant_id, horizon)
                # The burst's lag is the executor's only if the planner was done by now.
                note(f"at the first instant the planner had written {written:,} of "
                     f"{progress.planned:,} runs")
            stats = sink_watch.read()
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
        final = sink_watch.read()
        progress.done(final)
        cpu = per_run_us(cpu_at_first, cpu_seconds(replica_pids), int(final.get("unique") or 0))
        if cpu is not None:
            note(f"cronwire: {cpu:,.0f} µs of replica CPU per delivered run, first instant "
                 "to the end of the drain")
        await _planner_lead(pool, tenant_id, first)
        now = await db_now(pool)
        counts = {r["status"]: r["n"] for r in await pool.fetch(Q["loadtest_run_counts"], tenant_id, horizon)}
        note(f"run states up to the horizon: {counts}")
        return max(0.0, (now - horizon).total_seconds())
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
    note(f"planner wrote the first instant's last run {when} the instant")
