"""The scheduling-semantics flags of `cronwire schedules` from the shell against a live
`cronwire serve` (one per module, all roles, see conftest.py): overlap, jitter, one-time
`--at`, `--max-runs`, `--pause-after-failures`, `pause --note`, `backfill`, flow control,
and the usage errors of those flags (exit 2, one line). Real processes, real Postgres.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.cli_shell import InProcess, Live
from tests.support.cli_shell import hook as _hook


def test_the_scheduling_flags_and_commands_round_trip_through_the_api(
    live: Live, cli: InProcess,
) -> None:
    """`schedules create|update --overlap-policy --jitter-seconds --at --max-runs
    --pause-after-failures`, `schedules pause --note`, `schedules backfill`."""
    token = cli.ok("tenant", "create", "sched")["token"]
    created = cli.ok("schedules", "create", "--name", "hourly", "--cron", "0 * * * *",
                     *_hook(live), "--overlap-policy", "skip", "--jitter-seconds", "30",
                     "--max-runs", "500", "--pause-after-failures", "3", token=token)
    sid = created["id"]
    assert (created["overlap_policy"], created["jitter_seconds"], created["max_runs"],
            created["pause_after_failures"]) == ("skip", 30, 500, 3)
    updated = cli.ok("schedules", "update", sid, "--overlap-policy", "buffer_all",
                     "--no-max-runs", token=token)
    assert (updated["overlap_policy"], updated["max_runs"]) == ("buffer_all", None)
    paused = cli.ok("schedules", "pause", sid, "--note", "vendor outage, ticket 42", token=token)
    assert (paused["status"], paused["paused_reason"]) == ("paused", "vendor outage, ticket 42")
    assert cli.ok("schedules", "resume", sid, token=token)["paused_reason"] is None

    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    window = ["--start", (now - timedelta(hours=6)).isoformat(),
              "--end", (now - timedelta(hours=1)).isoformat()]
    dry = cli.ok("schedules", "backfill", sid, *window, "--dry-run", token=token)
    assert (dry["occurrences"], dry["created"], dry["existing"]) == (5, 0, 0)
    done = cli.ok("schedules", "backfill", sid, *window, "--overlap-policy", "allow", token=token)
    assert (done["occurrences"], done["created"], done["existing"]) == (5, 5, 0)
    again = cli.ok("schedules", "backfill", sid, *window, token=token)
    assert (again["created"], again["existing"]) == (0, 5)
    every = cli.ok("runs", "list", "--schedule-id", sid, "--since", window[1], "--until",
                   window[3], "--limit", "2", "--all", token=token)  # three pages of 2, 2, 1
    assert [run["trigger"] for run in every["items"]] == ["backfill"] * 5
    assert every["next_cursor"] is None
    line = cli.refused("schedules", "backfill", sid, "--start", "2001-01-01T00:00:00Z",
                       "--end", "2001-01-01T01:00:00Z", token=token, code=1)
    assert line.startswith("cronwire: start:") or "start:" in line

    at = (now + timedelta(days=3)).isoformat()
    once = cli.ok("schedules", "create", "--name", "once", "--at", at, *_hook(live), token=token)
    assert once["cron"] is None and once["at"] is not None
    back = cli.ok("schedules", "update", once["id"], "--cron", "0 5 * * *", token=token)
    assert back["at"] is None and back["cron"] == "0 5 * * *"
    again_once = cli.ok("schedules", "update", once["id"], "--at", at, token=token)
    assert again_once["cron"] is None


def test_the_flow_control_flags_round_trip_through_the_api(live: Live, cli: InProcess) -> None:
    """`schedules create|update --flow-key --max-concurrency --rate-per-second`, and
    `--no-flow-control`; an update changes only the members it names."""
    token = cli.ok("tenant", "create", "flows")["token"]
    created = cli.ok("schedules", "create", "--name", "paced", "--cron", "0 * * * *",
                     *_hook(live), "--flow-key", "billing", "--max-concurrency", "5",
                     "--rate-per-second", "2.5", token=token)
    assert created["flow_control"] == {"key": "billing", "max_concurrency": 5,
                                       "rate_per_second": 2.5, "burst": None}
    sid = created["id"]
    updated = cli.ok("schedules", "update", sid, "--max-concurrency", "2", token=token)
    assert updated["flow_control"] == {"key": "billing", "max_concurrency": 2,
                                       "rate_per_second": 2.5, "burst": None}
    assert "flow_control.max_concurrency" in cli.refused(
        "schedules", "update", sid, "--max-concurrency", "0", token=token, code=1)
    cli.refused("schedules", "update", sid, "--no-flow-control", "--flow-key", "x",
                token=token, code=2)
    cleared = cli.ok("schedules", "update", sid, "--no-flow-control", token=token)
    assert cleared["flow_control"] is None


@pytest.mark.parametrize(
    "args",
    [["schedules", "create", "--name", "x", "--url", "http://a/"],  # neither --cron nor --at
     ["schedules", "create", "--name", "x", "--url", "http://a/", "--cron", "* * * * *",
      "--at", "2030-01-01T00:00:00Z"],
     ["schedules", "create", "--name", "x", "--url", "http://a/", "--cron", "* * * * *",
      "--overlap-policy", "queue"],
     ["schedules", "create", "--name", "x", "--url", "http://a/", "--cron", "* * * * *",
      "--jitter-seconds", "soon"],
     ["schedules", "update", str(uuid.uuid4()), "--max-runs", "3", "--no-max-runs"],
     ["schedules", "backfill", str(uuid.uuid4()), "--start", "2030-01-01T00:00:00Z"],
     ["runs", "replay"], ["runs", "replay", "--status", "succeeded"],
     ["runs", "replay", str(uuid.uuid4()), "--status", "failed"],
     ["runs", "list", "--all", "--follow"]],
)
def test_scheduling_usage_errors_exit_2_with_one_line(args: list[str], cli: InProcess) -> None:
    cli.refused(*args, token="cwt_any", code=2)
