"""`loadtest --compare` measures pgqueuer's CPU per job the way it measures cronwire's
(issue 55 asks for the split per run of both parties from one invocation): its workers',
Postgres's and the sink's, from the instant the jobs become visible to the queue's end.
Here a small real drain: pgqueuer's own worker processes (two for the one replica:
its best may need more than one), the real Postgres, a real sink."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from cronwire.bootstrap.factories import blank_database
from cronwire.loadtest.baselines import PgqConfig
from cronwire.loadtest.compare import _pgqueuer
from cronwire.loadtest.plan import LoadTestPlan

pytest.importorskip("pgqueuer")

JOBS = 300


async def _postmaster(admin_dsn: str) -> int | None:
    """The server's postmaster pid: the checkpointer's parent, if the server runs here."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        pid = await conn.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
    finally:
        await conn.close()
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None  # a server elsewhere (SCHEDULER_TEST_DATABASE_URL)
    return int(stat.rpartition(")")[2].split()[1])


def test_pgqueuer_is_measured_with_its_cpu_per_job_by_who_spent_it(
    admin_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    postmaster = asyncio.run(_postmaster(admin_dsn))
    dsn = asyncio.run(blank_database(admin_dsn, f"pgq_split_{tmp_path.name[-8:].lower()}"))
    plan = LoadTestPlan(mode="postgres", schedules=JOBS, replicas=1, duration=0,
                        out=tmp_path, scenario="burst", sink="python")
    config = PgqConfig("pool", 100, 1000, processes=2)
    measure = _pgqueuer(plan, dsn, JOBS, tmp_path / "baselines.log", config, postmaster)
    # its sink's records are where the load test's clean-up looks for them
    assert (tmp_path / f"{config.sink_name}.jsonl").is_file(), sorted(tmp_path.iterdir())
    log = (tmp_path / "baselines.log").read_text(errors="replace")[-2000:]
    assert measure.jobs_per_second > 0, log
    split = measure.split()
    assert split["worker"] > 0 and split["sink"] > 0, (split, log)
    if postmaster is not None:
        assert split["postgres"] > 0, split
    assert measure.cpu_note().startswith("µs of CPU per job: worker ")
    # two processes per replica, both counted
    assert f"{JOBS} jobs enqueued; 2 worker process(es) at work" in capsys.readouterr().err
