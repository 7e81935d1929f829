"""Resuming a paused `fire_all` schedule delivers every missed run within the catch-up
window at once (once with no warning). `schedules resume --dry-run` counts them and
changes nothing; `schedules resume` says on stderr how many it makes due, and the planner
then writes exactly that many runs. Real `cronwire serve`, real Postgres."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg

from cronwire.domain.cron import occurrences_between
from tests.support.cli_shell import InProcess, Live
from tests.support.cli_shell import hook as _hook

EVERY_MINUTE = "* * * * *"
PAUSED_MINUTES = 30
CATCHUP_SECONDS = 600


def _paused_since(live: Live, schedule_id: str, since: datetime) -> None:
    """As if the pause had begun at ``since``: the planner's cursor was left there."""
    async def move() -> None:
        conn = await asyncpg.connect(live.dsn)
        try:
            await conn.execute("UPDATE schedule SET next_fire_at = $1 WHERE id = $2",
                               since, uuid.UUID(schedule_id))
        finally:
            await conn.close()

    asyncio.run(move())


def _due_within_window(at: datetime) -> int:
    """Minutes in [at - catch-up window, at]: what fire_all replays."""
    return len(occurrences_between(EVERY_MINUTE, "UTC",
                                   at - timedelta(seconds=CATCHUP_SECONDS, microseconds=1), at,
                                   10_000))


def test_resume_says_how_many_missed_runs_it_delivers_at_once(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "resumer")["token"]
    created = cli.ok("schedules", "create", "--name", "minutely", "--cron", EVERY_MINUTE,
                     *_hook(live), "--misfire-policy", "fire_all", "--catchup-window-seconds",
                     str(CATCHUP_SECONDS), "--paused", token=token)
    sid = created["id"]
    since = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=PAUSED_MINUTES)
    _paused_since(live, sid, since)

    before = datetime.now(UTC)
    code, out, err = cli.run("schedules", "resume", sid, "--dry-run", token=token)
    after = datetime.now(UTC)
    assert code == 0, err
    dry = json.loads(out)
    assert dry["dry_run"] is True and dry["status"] == "paused"  # nothing changed
    assert _due_within_window(before) <= dry["runs_due"] <= _due_within_window(after) + 1
    assert f"would make {dry['runs_due']:,} runs due at once" in err and "fire_all" in err
    assert cli.ok("schedules", "get", sid, token=token)["status"] == "paused"

    # runs_due is counted at the resume, and the planner judges the missed minutes at that
    # same instant (schedule.resumed_at, migration 0031; before it, at its own pass a
    # moment later, and CI once saw 9 runs listed against runs_due 10). This test's own
    # ``--until`` is read from its clock after the answer: the resume is not made in a
    # minute's last 3 seconds, so that the new minute's run stays beyond it.
    if datetime.now(UTC).second >= 57:
        time.sleep(61 - datetime.now(UTC).second)
    code, out, err = cli.run("schedules", "resume", sid, token=token)
    resumed_at = datetime.now(UTC)
    assert code == 0, err
    resumed = json.loads(out)
    assert resumed["status"] == "active" and resumed["dry_run"] is False
    assert f"makes {resumed['runs_due']:,} runs due at once" in err
    # What the planner then writes up to the resume: runs_due runs to deliver, the older
    # missed minutes recorded as skipped.
    deadline = time.monotonic() + 30
    while True:
        runs = cli.ok("runs", "list", "--schedule-id", sid, "--until",
                      resumed_at.isoformat(), "--limit", "200", "--all", token=token)["items"]
        delivering = [r for r in runs if r["status"] != "skipped"]
        if len(runs) > PAUSED_MINUTES or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(delivering) == resumed["runs_due"], (len(runs), [r["status"] for r in runs])
