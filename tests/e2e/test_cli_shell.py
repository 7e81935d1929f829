"""The command line from the shell: `schedules`/`runs` against a live `cronwire serve` over
HTTP, `tenant list|tokens|revoke` against its database. Real processes, real Postgres.

One server (all roles) serves the whole module; tests create their own tenants, so they
share nothing but the process. Deliveries go to the server's own /healthz (GET, 200).
"""
from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwire.adapters.embedded.postgres import EmbeddedPostgres, free_port
from cronwire.cli.main import main
from cronwire.version import version
from tests.support.cli_shell import InProcess, Live, follow_runs
from tests.support.cli_shell import hook as _hook
from tests.support.cli_shell import new_tenant as _tenant
from tests.support.cli_shell import ok as _ok
from tests.support.cli_shell import refused as _refused
from tests.support.cli_shell import spawn_serve as _spawn
from tests.support.cli_shell import status as _status
from tests.support.polling import wait_until_sync
from tests.support.processes import (
    clean_env,
    cronwire_executable,
    run_cli,
    stop_process,
)
from tests.support.servers import DatabaseFactory


@pytest.fixture(scope="module")
def module_database(database_factory: DatabaseFactory) -> Iterator[str]:
    name, dsn = asyncio.run(database_factory.create())
    yield dsn
    asyncio.run(database_factory.drop(name))


@pytest.fixture(scope="module")
def live(module_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    port = free_port()
    log = tmp_path_factory.mktemp("cli-shell") / "serve.log"
    proc = _spawn(module_database, port, "api,planner,executor", log)
    try:
        yield Live(module_database, f"http://127.0.0.1:{port}")
    finally:
        stop_process(proc)

@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        live: Live) -> InProcess:
    return InProcess(monkeypatch, capsys, live)

def test_version_is_the_installed_one() -> None:
    result = run_cli("--version", env=clean_env())
    assert result.returncode == 0 and result.stdout.strip() == f"cronwire {version()}"


def test_a_newcomer_goes_from_tenant_create_to_an_inspected_delivered_run(live: Live) -> None:
    env = live.env(_tenant(live)["token"])
    created = _ok("schedules", "create", "--name", "every-second", "--cron", "* * * * * *",
                  *_hook(live), "--header", "x-team: ops", "--max-attempts", "2", env=env)
    assert created["signing_secret"].startswith("whsec_")
    assert created["target"]["headers"] == {"x-team": "ops"}
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


def test_every_schedule_command_round_trips_through_the_api(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "acme")["token"]
    created = cli.ok("schedules", "create", "--name", "nightly", "--cron", "0 3 * * *",
                     "--timezone", "Europe/Berlin", *_hook(live), "--header", "x-a:1",
                     "--body", '{"k": 1}', "--max-attempts", "5",
                     "--initial-backoff-seconds", "7", "--misfire-policy", "skip", "--paused",
                     token=token)
    sid = created["id"]
    assert created["paused"] is True and created["misfire_policy"] == "skip"
    assert cli.ok("schedules", "get", sid, token=token)["timezone"] == "Europe/Berlin"
    listed = cli.ok("schedules", "list", "--all", "--limit", "1", token=token)
    assert [s["id"] for s in listed["items"]] == [sid] and listed["next_cursor"] is None

    # target and retry are replaced whole by the API: the CLI keeps what no flag names.
    updated = cli.ok("schedules", "update", sid, "--cron", "30 4 * * *", "--max-attempts", "2",
                     token=token)
    assert updated["cron"] == "30 4 * * *" and updated["retry"]["max_attempts"] == 2
    assert updated["retry"]["initial_backoff_seconds"] == 7
    assert updated["target"]["headers"] == {"x-a": "1"} and updated["target"]["body"]
    updated = cli.ok("schedules", "update", sid, "--header", "x-b:2", "--no-body", token=token)
    assert updated["target"]["headers"] == {"x-b": "2"} and updated["target"]["body"] is None
    assert updated["target"]["method"] == "GET"

    assert cli.ok("schedules", "resume", sid, token=token)["status"] == "active"
    assert cli.ok("schedules", "pause", sid, token=token)["status"] == "paused"
    run = cli.ok("schedules", "trigger", sid, token=token)
    assert run["trigger"] == "manual" and run["schedule_id"] == sid
    fires = cli.ok("schedules", "preview", sid, "--count", "3", token=token)["items"]
    assert len(fires) == 3 and all(f["utc"].endswith("Z") for f in fires)
    rotated = cli.ok("schedules", "rotate-secret", sid, token=token)
    assert rotated["signing_secret"] != created["signing_secret"]
    assert cli.ok("schedules", "delete", sid, token=token) == {"id": sid, "deleted": True}
    assert "not found" in cli.refused("schedules", "get", sid, token=token, code=1)


def test_runs_list_all_follows_every_page(live: Live, cli: InProcess) -> None:
    """Issue 23: documented ("--all follows every page"), answered "unrecognized arguments"."""
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


def test_api_refusals_print_the_apis_message_and_exit_1(live: Live, cli: InProcess) -> None:
    token = _tenant(live)["token"]
    line = _refused("schedules", "create", "--name", "x", "--cron", "61 * * * *", *_hook(live),
                    env=live.env(token), code=1)  # as a process: exit status 1, one line
    assert line.startswith("cronwire: cron: ")
    assert cli.refused("schedules", "create", "--name", "x", "--cron", "* * * * *",
                       *_hook(live), "--max-attempts", "9", token=token,
                       code=1).startswith("cronwire: retry.max_attempts: ")
    assert cli.refused("runs", "list", "--since", "yesterday", token=token,
                       code=1).startswith("cronwire: since: ")
    assert "not found" in cli.refused("runs", "get", str(uuid.uuid4()), token=token, code=1)
    assert "unknown or revoked token" in cli.refused("schedules", "list", token="cwt_bogus",
                                                     code=1)
    assert "no such route" in cli.refused("schedules", "list", "--api-url",
                                          f"{live.url}/not-cronwire", token=token, code=1)


@pytest.mark.parametrize(
    "args",
    [["schedules", "get", "not-a-uuid"], ["schedules", "create", "--name", "x"],
     ["schedules", "create", "--name", "x", "--cron", "* * * * *", "--url", "http://a/",
      "--header", "no-colon"],
     ["schedules", "create", "--name", "x", "--cron", "* * * * *", "--url", "http://a/",
      "--misfire-policy", "sometimes"],
     ["schedules", "update", str(uuid.uuid4())], ["schedules", "frobnicate"],
     ["runs", "list", "--status", "done"], ["runs", "list", "--limit", "ten"],
     ["runs", "list", "--api-url", "ftp://example.com"],
     ["runs", "list", "--api-url", "http://[::1"], ["runs", "list", "--url", "http://h:port"],
     ["schedules"],
     ["runs", "list", "--follow", "--cursor", "abc"], ["runs", "list", "--follow", "--all"],
     ["tenant", "tokens", "nope"], ["tenant", "revoke", "nope"], ["tenant", "list", "extra"]],
)
def test_usage_errors_exit_2_with_one_line(args: list[str], cli: InProcess) -> None:
    cli.refused(*args, token="cwt_any", code=2)


def test_no_token_is_a_usage_error_and_no_server_is_one_line(live: Live) -> None:
    assert "CRONWIRE_TOKEN" in _refused("schedules", "list", env=live.env(), code=2)
    closed = f"http://127.0.0.1:{free_port()}"
    line = _refused("runs", "list", "--api-url", closed, env=live.env("cwt_any"), code=1)
    assert "connection refused" in line and closed in line


def test_a_terminal_gets_tables(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "tables")["token"]
    env = live.env(token)
    created = cli.ok("schedules", "create", "--name", "tabled", "--cron", "0 3 * * *",
                     *_hook(live), "--paused", token=token)
    listing = _in_terminal(["schedules", "list"], env)
    header, row = listing.splitlines()[:2]
    assert header.split() == ["ID", "NAME", "CRON", "TIMEZONE", "STATUS", "NEXT", "FIRE",
                              "(UTC)", "URL"]
    assert row.startswith(created["id"]) and "paused" in row
    shown = _in_terminal(["schedules", "get", created["id"]], env)
    assert "target.url" in shown and "{" not in shown
    assert json.loads(_in_terminal(["schedules", "get", created["id"], "--json"], env))


def _in_terminal(args: list[str], env: dict[str, str]) -> str:
    """stdout of the CLI when it is a terminal (a pseudo-terminal of our own)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([cronwire_executable(), *args], env=env, stdout=follower,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    return b"".join(chunks).decode().replace("\r\n", "\n")


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


def test_operators_list_tenants_and_tokens_and_revoke_on_every_replica(
    live: Live, cli: InProcess, module_database: str, tmp_path: Path,
) -> None:
    first = cli.ok("tenant", "create", "operated")
    second = cli.ok("tenant", "token", first["tenant_id"])
    cli.ok("schedules", "create", "--name", "counted", "--cron", "0 3 * * *", *_hook(live),
           "--paused", token=first["token"])

    tenants = cli.ok("tenant", "list", "--json")
    mine = [t for t in tenants if t["id"] == first["tenant_id"]]
    assert mine == [{"id": first["tenant_id"], "name": "operated", "schedules": 1,
                     "live_tokens": 2, "created_at": mine[0]["created_at"]}]
    tokens = _ok("tenant", "tokens", first["tenant_id"], "--json", env=live.env())
    assert [t["prefix"] for t in tokens] == [first["token"][:10], second["token"][:10]]
    shown = json.dumps(tokens)
    assert first["token"] not in shown and second["token"] not in shown
    assert all(t["revoked_at"] is None and uuid.UUID(t["id"]) for t in tokens)

    port = free_port()
    other = _spawn(module_database, port, "api", tmp_path / "replica-b.log")
    try:
        replica_b = f"http://127.0.0.1:{port}"
        assert _status(live.url, first["token"]) == _status(replica_b, first["token"]) == 200
        revoked = _ok("tenant", "revoke", tokens[0]["id"], env=live.env())
        assert revoked["id"] == tokens[0]["id"] and revoked["revoked_at"]
        # At once: the very next request on either replica, no waiting for a cache.
        assert _status(replica_b, first["token"]) == 401
        assert _status(live.url, first["token"]) == 401
        assert _status(replica_b, second["token"]) == 200
        assert "revoked" in cli.refused("schedules", "list", "--api-url", replica_b,
                                        token=first["token"], code=1)
    finally:
        stop_process(other)
    again = cli.ok("tenant", "revoke", tokens[0]["id"])
    assert again["revoked_at"] == revoked["revoked_at"]  # idempotent
    listed = cli.ok("tenant", "list", "--json")
    assert [t["live_tokens"] for t in listed if t["id"] == first["tenant_id"]] == [1]


def test_unknown_ids_name_the_database(live: Live, cli: InProcess) -> None:
    database = live.dsn.rsplit("/", 1)[-1]
    line = _refused("tenant", "tokens", str(uuid.uuid4()), env=live.env(), code=2)
    assert "does not exist in database postgresql://" in line and database in line
    for args in (["tenant", "revoke", str(uuid.uuid4())], ["tenant", "token", str(uuid.uuid4())]):
        line = cli.refused(*args, code=2)
        assert "does not exist in database postgresql://" in line and database in line


def test_an_unreachable_database_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/cronwire"
    monkeypatch.setenv("SCHEDULER_DATABASE_URL", closed)
    for args in (["tenant", "list"], ["tenant", "create", "x"],
                 ["tenant", "token", str(uuid.uuid4())]):
        assert main(args) == 1
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1, err
    assert f"cannot use database {closed}" in main_line(["tenant", "revoke", str(uuid.uuid4())],
                                                        capsys)


def main_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 1
    return capsys.readouterr().err.strip()


def test_embedded_database_commands_say_which_one_in_one_line_and_refuse_a_missing_one(
    server_dir: Path,
) -> None:
    """Each operator command says which database it used in one tidy line on stderr,
    never a DSN or a port (issue 23: they printed two INFO lines with both)."""
    missing = server_dir / "elsewhere"
    line = _refused("tenant", "list", env=clean_env(SCHEDULER_HOME=str(missing)), code=2)
    assert f"no embedded database in {missing.resolve() / 'postgres'}" in line
    _refused("tenant", "token", str(uuid.uuid4()), env=clean_env(SCHEDULER_HOME=str(missing)),
             code=2)
    assert not missing.exists(), "a read command created a database"

    home = server_dir / "home"
    data_dir = home.resolve() / "postgres"
    env = clean_env(SCHEDULER_HOME=str(home))
    first = run_cli("tenant", "create", "fresh", env=env)  # a fresh install's first command
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines() == [
        f"cronwire: using the embedded database in {data_dir} (new and empty, started for "
        "this command; a `cronwire serve` started elsewhere does not see it)"]
    created = json.loads(first.stdout)
    server = EmbeddedPostgres(data_dir)
    server.start()  # as `cronwire serve` would have; the commands reuse it
    try:
        said = f"cronwire: using the embedded database in {data_dir} (already running)"
        for args in (["tenant", "list"], ["tenant", "token", created["tenant_id"]],
                     ["migrate"], ["partitions", "maintain"]):
            result = run_cli(*args, env=env)
            assert result.returncode == 0, (args, result.stderr)
            assert result.stderr.splitlines() == [said], args
            json.loads(result.stdout)
        listed = run_cli("tenant", "list", env=env)
        assert [t["id"] for t in json.loads(listed.stdout)] == [created["tenant_id"]]
        line = _refused("tenant", "tokens", str(uuid.uuid4()), env=env, code=2)
        assert f"does not exist in the embedded database in {data_dir}" in line
    finally:
        server.stop()


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


def test_explain_stats_and_alerts_commands_round_trip_through_the_api(
    live: Live, cli: InProcess
) -> None:
    token = cli.ok("tenant", "create", "watcher")["token"]
    sid = cli.ok("schedules", "create", "--name", "wall", "--cron", "30 2 * * *",
                 "--timezone", "Europe/Berlin", *_hook(live), "--paused", token=token)["id"]
    explained = cli.ok("schedules", "explain", sid, "--at", "2027-03-28T00:00:00Z", token=token)
    assert explained["occurrence"] == "2027-03-28T01:00:00Z"
    assert explained["verdict"] == "paused" and explained["reason"].startswith("DST moved it")
    stats = cli.ok("schedules", "stats", sid, "--window", "7d", token=token)
    assert stats["window"] == "7d" and stats["occurrences"] == 0
    assert cli.ok("schedules", "stats", sid, token=token)["window"] == "24h"
    assert "invalid choice" in cli.refused("schedules", "stats", sid, "--window", "2h",
                                           token=token, code=2)
    assert "--at" in cli.refused("schedules", "explain", sid, token=token, code=2)

    alerts = cli.ok("alerts", "set", "--url", f"{live.url}/healthz", "--event",
                    "schedule.failing", "--event", "schedule.late", token=token)
    assert alerts["events"] == ["schedule.failing", "schedule.late"]
    assert alerts["signing_secret"].startswith("whsec_")
    shown = cli.ok("alerts", "get", token=token)
    assert shown["url"] == f"{live.url}/healthz" and "signing_secret" not in shown
    assert cli.ok("alerts", "events", token=token) == {"items": [], "next_cursor": None}
    ruled = cli.ok("schedules", "update", sid, "--alert-after-failures", "3",
                   "--alert-max-duration-ms", "900", token=token)
    assert ruled["alerts"] == {"after_failures": 3, "late_after_seconds": None,
                               "max_duration_ms": 900}
    ruled = cli.ok("schedules", "update", sid, "--alert-after-failures", "none", token=token)
    assert ruled["alerts"]["after_failures"] is None and ruled["alerts"]["max_duration_ms"] == 900
    assert "url" in cli.refused("alerts", "set", "--url", "ftp://x", token=token, code=1)
