"""`cronwire loadtest` end to end: its own Postgres, sink and replica processes.

Correctness only (every planned fire delivered once); throughput is measured by the
full-size runs in the README, never asserted here."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import asyncpg
import pytest

from cronwire.harness.nginx_sink import nginx_binary
from tests.support.brokers import APACHE, bootstrap_of
from tests.support.processes import clean_env, run_cli
from tests.support.servers import with_database

CONTRACT_KEYS = {
    "mode", "scenario", "schedules", "replicas", "planned", "delivered", "duplicates", "lost",
    "runs_per_second", "fire_lag_p50_ms", "fire_lag_p95_ms", "fire_lag_p99_ms",
    "drain_seconds",
}


def _loadtest(tmp_path: Path, *args: str, sink: str | None = None,
              logged: tuple[str, ...] = (), stderr: list[str] | None = None,
              **env: str) -> dict[str, object]:
    """``tmp_path``: a directory of the test's own (``server_dir``): the run's Postgres
    lives in --out while it runs. ``sink``: the receiver the run must say it used;
    ``logged``: lines (or their starts) the run must log on stderr; ``stderr``: a list
    the run's stderr is appended to."""
    out = tmp_path / "out"
    result = run_cli(
        "loadtest", *args, "--out", str(out),
        env=clean_env(MPLCONFIGDIR=str(tmp_path / "mpl"), **env), timeout=170,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    if stderr is not None:
        stderr.append(result.stderr)
    assert "delivered" in result.stderr  # the progress line
    if sink is not None:
        assert f"[loadtest] sink: {sink}" in result.stderr
    for line in logged:
        assert f"\n[loadtest] {line}" in result.stderr, result.stderr[-2000:]
    report: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(report) == CONTRACT_KEYS
    assert json.loads((out / "report.json").read_text()) == report
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.png"]  # no data kept
    return report


async def _loadtest_databases(admin_dsn: str) -> set[str]:
    conn = await asyncpg.connect(admin_dsn)
    try:
        rows = await conn.fetch("SELECT datname FROM pg_database WHERE datname LIKE 'loadtest_%'")
        return {row["datname"] for row in rows}
    finally:
        await conn.close()


async def _succeeded_runs(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM job_run WHERE status = 'succeeded'"))
    finally:
        await conn.close()


@pytest.mark.slow
@pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")
async def test_postgres_burst_counted_from_nginxs_log_agrees_with_the_database(
    tmp_path: Path, admin_dsn: str,
) -> None:
    """The default sink where nginx is installed: its access log, read back, says every run
    was delivered once, and so does the database the replicas wrote their results to."""
    before = await _loadtest_databases(admin_dsn)
    report = await asyncio.to_thread(
        _loadtest, tmp_path, "--mode", "postgres", "--scenario", "burst",
        "--schedules", "2000", "--replicas", "1", sink="nginx",
        SCHEDULER_DATABASE_URL=admin_dsn)
    assert (report["planned"], report["delivered"]) == (2000, 2000)
    assert (report["duplicates"], report["lost"]) == (0, 0)
    [database] = await _loadtest_databases(admin_dsn) - before
    assert await _succeeded_runs(with_database(admin_dsn, database)) == 2000


@pytest.mark.slow
def test_a_jittered_burst_spreads_over_the_window_and_is_measured_from_fire_after(
    tmp_path: Path,
) -> None:
    """--jitter-seconds 10: the burst's 1,000 runs arrive over ten seconds, not at once, and
    the lag (from each run's jittered fire_after) stays small. Without the jitter the same
    burst would have been done in about a second. With --statements, the Postgres the run
    started names the claim and the resolve among the statements it spent its time on. Its
    WAL per delivered run is logged: at least the claim's and the resolve's row versions;
    and so are the machine's busy cores, of which the three parties are a part, and what
    the backends waited for, sampled through the window."""
    stderr: list[str] = []
    report = _loadtest(tmp_path, "--scenario", "burst", "--schedules", "1000",
                       "--replicas", "1", "--jitter-seconds", "10", "--statements",
                       logged=("statement job_run_claim: ", "statement job_run_resolve: "),
                       stderr=stderr)
    assert (report["planned"], report["delivered"]) == (1000, 1000)
    assert (report["duplicates"], report["lost"]) == (0, 0)
    assert 60 <= float(report["runs_per_second"]) <= 130  # about 1,000 / 10 s
    assert float(report["fire_lag_p50_ms"]) < 1000
    wal = re.search(r"\[loadtest\] Postgres WAL: ([0-9.,]+) records and ([0-9,]+) bytes per "
                    r"delivered run", stderr[0])
    assert wal is not None, stderr[0][-2000:]
    records, written = (float(wal.group(i).replace(",", "")) for i in (1, 2))
    assert records >= 2 and written >= 2 * 50  # two heap records of 50+ bytes at least
    # The machine's busy cores over the same window hold the three parties' CPU.
    cores = re.search(r"\[loadtest\] the machine: ([0-9.]+) of (\d+) cores busy, .*; the "
                      r"replicas [0-9.]+, Postgres [0-9.]+ and the sink [0-9.]+: ([0-9.]+) "
                      r"of them", stderr[0])
    assert cores is not None, stderr[0][-2000:]
    busy, total, parties = float(cores.group(1)), int(cores.group(2)), float(cores.group(3))
    assert 0 < parties <= busy + 0.05 and busy <= total  # 0.05: /proc counts in ticks
    # --statements also samples what the backends wait for, all through the ~10 s window.
    sampled = re.search(r"\[loadtest\] waits: ([0-9,]+) samples of pg_stat_activity", stderr[0])
    assert sampled is not None, stderr[0][-2000:]
    assert int(sampled.group(1).replace(",", "")) >= 100


@pytest.mark.slow
@pytest.mark.parametrize("broker", ["embedded", "apache"])
def test_kafka_burst_delivers_every_run_exactly_once(
    server_dir: Path, broker: str, request: pytest.FixtureRequest
) -> None:
    """On the embedded broker, and with --kafka-bootstrap on Apache Kafka the user runs."""
    given = []
    if broker == "apache":
        given = ["--kafka-bootstrap", bootstrap_of(request, APACHE)]
    report = _loadtest(server_dir, "--mode", "kafka", "--scenario", "burst",
                       "--schedules", "2000", "--replicas", "1", *given)
    assert (report["planned"], report["delivered"]) == (2000, 2000)
    assert (report["duplicates"], report["lost"]) == (0, 0)


@pytest.mark.slow
def test_steady_on_two_replicas_reports_every_fire_delivered_once(server_dir: Path) -> None:
    report = _loadtest(server_dir, "--scenario", "steady", "--schedules", "50",
                       "--replicas", "2", "--duration", "3", "--sink", "python",
                       sink="python")
    assert report["planned"] == 50 * 3  # one fire a second for 3 s
    assert (report["delivered"], report["duplicates"], report["lost"]) == (150, 0, 0)


def test_compare_without_pgqueuer_says_so_in_one_line(tmp_path: Path) -> None:
    # sitecustomize hides pgqueuer from this process: find_spec() sees None.
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['pgqueuer'] = None\n")
    result = run_cli("loadtest", "--compare", "--out", str(tmp_path / "out"),
                     env=clean_env(PYTHONPATH=str(tmp_path)))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "cronwire: --compare: pgqueuer is not installed; pip install 'cronwire[bench]'"
    ]
    assert not (tmp_path / "out").exists()


def test_statements_are_counted_only_on_the_postgres_the_load_test_starts(
        tmp_path: Path) -> None:
    result = run_cli("loadtest", "--statements", "--out", str(tmp_path / "out"),
                     env=clean_env(SCHEDULER_DATABASE_URL="postgresql://127.0.0.1:9/x"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "cronwire: --statements: only with the Postgres the load test starts itself (unset "
        "SCHEDULER_DATABASE_URL)"
    ]
    assert not (tmp_path / "out").exists()
