"""`cronwire runs` from the shell against a live `cronwire serve` (one per module, all
roles, see conftest.py): a delivered run inspected with `runs list|get`, `--all` through
every page, `--follow` as runs change, and `runs replay` of the dead letters. Real
processes, real Postgres; deliveries go to the server's own /healthz (GET, 200).
"""

from __future__ import annotations

from typing import Any

from cronwire.loopback import free_port
from tests.support.cli_shell import InProcess, Live, follow_runs
from tests.support.cli_shell import hook as _hook
from tests.support.cli_shell import new_tenant as _tenant
from tests.support.cli_shell import ok as _ok
from tests.support.polling import wait_until_sync


def test_a_newcomer_goes_from_tenant_create_to_an_inspected_delivered_run(live: Live) -> None:
    env = live.env(_tenant(live)["token"])
    created = _ok("schedules", "create", "--name", "every-second", "--cron", "* * * * * *",
                  *_hook(live), "--header", "x-team: ops", "--max-attempts", "2", env=env)
    assert created["signing_secret"].startswith("whsec_")
    assert created["target"]["headers"] == {"x-team": "***"}  # sealed, never shown (ADR 0061)
    assert created["retry"]["max_attempts"] == 2

    def delivered() -> list[dict[str, Any]]:
        page = _ok("runs", "list", "--schedule-id", created["id"], "--status", "succeeded",
                   "--limit", "1", env=env)
        return list(page["items"])

    wait_until_sync(delivered, within=30, every=0.3)
    run = _ok("runs", "get", delivered()[0]["id"], env=env)
    assert run["status"] == "succeeded" and run["schedule_id"] == created["id"]
    assert run["attempts"][0]["status_code"] == 200
    _ok("schedules", "delete", created["id"], env=env)


def test_runs_list_all_follows_every_page(live: Live, cli: InProcess) -> None:
    """Found by a first user: documented ("--all follows every page"), answered "unrecognized arguments"."""
    token = cli.ok("tenant", "create", "pager")["token"]
    paused = cli.ok("schedules", "create", "--name", "paged", "--cron", "0 3 * * *",
                    *_hook(live), "--paused", token=token)
    triggered = [cli.ok("schedules", "trigger", paused["id"], token=token)["id"]
                 for _ in range(3)]
    listed = cli.ok("runs", "list", "--all", "--limit", "1", "--schedule-id", paused["id"],
                    token=token)
    assert [run["id"] for run in listed["items"]] == triggered[::-1]  # newest first
    assert listed["next_cursor"] is None
    one = cli.ok("runs", "list", "--limit", "1", "--schedule-id", paused["id"], token=token)
    assert len(one["items"]) == 1 and one["next_cursor"]


def test_follow_prints_a_new_run_when_it_arrives(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "follower")["token"]
    paused = cli.ok("schedules", "create", "--name", "followed", "--cron", "0 3 * * *",
                    *_hook(live), "--paused", token=token)  # no cron runs: only triggered
    with follow_runs(["--schedule-id", paused["id"], "--interval", "0.2"],
                     live.env(token)) as followed:
        run = cli.ok("schedules", "trigger", paused["id"], token=token)
        seen = followed.wait_for(lambda runs: any(
            r["id"] == run["id"] and r["status"] == "succeeded" for r in runs))
    assert {r["id"] for r in seen} == {run["id"]}  # one run, shown as it changed
    assert followed.returncode == 130 and "Traceback" not in followed.stderr, followed.stderr


def test_runs_replay_repeats_a_failed_run_and_the_dead_letters(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "replayer")["token"]
    closed = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: every attempt fails
    sid = cli.ok("schedules", "create", "--name", "dead", "--cron", "0 3 * * *", "--url", closed,
                 "--max-attempts", "1", token=token)["id"]
    first = cli.ok("schedules", "trigger", sid, token=token)["id"]
    second = cli.ok("schedules", "trigger", sid, token=token)["id"]

    def failed() -> bool:
        runs = cli.ok("runs", "list", "--schedule-id", sid, "--status", "failed", token=token)
        return len(runs["items"]) == 2

    wait_until_sync(failed, within=60, every=0.5)
    replay = cli.ok("runs", "replay", first, token=token)
    assert (replay["trigger"], replay["replay_of"]) == ("replay", first)
    assert "replayed already" in cli.refused("runs", "replay", first, token=token, code=1)

    def replay_failed() -> bool:
        return bool(cli.ok("runs", "get", replay["id"], token=token)["status"] == "failed")

    wait_until_sync(replay_failed, within=60, every=0.5)  # the target still refuses
    # The dead letters now: the second run and the failed replay (a replay that fails is
    # a dead letter itself); the first is replayed already.
    bulk = cli.ok("runs", "replay", "--status", "failed", "--schedule-id", sid, token=token)
    assert bulk["replayed"] == 2
    repeated = {cli.ok("runs", "get", run_id, token=token)["replay_of"] for run_id in bulk["runs"]}
    assert repeated == {second, replay["id"]}
