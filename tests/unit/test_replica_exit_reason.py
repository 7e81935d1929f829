"""A replica that ended says why in the chaos report: its exit status and last errors."""

from __future__ import annotations

import sys
from pathlib import Path

from cronwire.harness.fleet import Replica

CRASHING = (
    "import sys\n"
    "print('2026-12-04 03:07:38,455 INFO cronwire: replica x serving')\n"
    "for n in range(5):\n"
    "    print(f'2026-12-04 03:07:39,47{n} ERROR cronwire.service.supervisor: loop {n} crashed')\n"
    "print('2026-12-04 03:07:40,000 WARNING cronwire: not an error')\n"
    "sys.exit(1)\n"
)


async def test_an_ended_replica_reports_its_exit_status_and_last_errors(tmp_path: Path) -> None:
    replica = Replica("x", env={}, log_dir=tmp_path, command=(sys.executable, "-c", CRASHING))
    await replica.start(wait_healthy=False)
    assert replica.proc is not None
    replica.proc.wait(timeout=30)
    reason = replica.exit_reason()
    assert reason["replica"] == "x" and reason["exit_code"] == 1
    assert [line.rsplit(" ", 2)[-2] for line in reason["last_errors"]] == ["2", "3", "4"]
    assert all(" ERROR " in line for line in reason["last_errors"])


def test_a_replica_never_started_reports_no_status(tmp_path: Path) -> None:
    assert Replica("y", env={}, log_dir=tmp_path).exit_reason() == {
        "replica": "y", "exit_code": None, "last_errors": []}
