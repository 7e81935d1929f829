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
import queue
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cronwire.adapters.embedded.postgres import free_port
from cronwire.cli import main
from cronwire.version import version
from tests.support.processes import clean_env, cronwire_executable, run_cli, wait_http_ok
from tests.support.servers import DatabaseFactory


@dataclass(frozen=True)
class Live:
    dsn: str
    url: str

    def env(self, token: str | None = None, **more: str) -> dict[str, str]:
        """Environment of a CLI call: the live database and API, optionally a token."""
        env = clean_env(SCHEDULER_DATABASE_URL=self.dsn, CRONWIRE_URL=self.url, **more)
        env.pop("CRONWIRE_TOKEN", None)
        if token is not None:
            env["CRONWIRE_TOKEN"] = token
        return env


def _spawn(dsn: str, port: int, roles: str, log: Path) -> subprocess.Popen[bytes]:
    env = clean_env(SCHEDULER_DATABASE_URL=dsn, SCHEDULER_HTTP_PORT=str(port),
                    SCHEDULER_ROLES=roles, SCHEDULER_ALLOW_PRIVATE_TARGETS="true",
                    SCHEDULER_INSTANCE_ID=f"cli-{roles}-{port}",
                    SCHEDULER_SHUTDOWN_GRACE_SECONDS="2")
    with log.open("wb") as out:
        proc = subprocess.Popen([cronwire_executable(), "serve"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/readyz", 60, proc)
    except AssertionError:
        _stop(proc)
        raise AssertionError(log.read_text(errors="replace")[-3000:]) from None
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
        _stop(proc)


def _ok(*args: str, env: dict[str, str]) -> Any:
    """Run a CLI command that must succeed; its stdout (JSON when piped) parsed."""
    result = run_cli(*args, env=env)
    assert result.returncode == 0, (args, result.stderr)
    return json.loads(result.stdout) if result.stdout.strip() else None


def _refused(*args: str, env: dict[str, str], code: int) -> str:
    """Run a CLI command that must fail with ``code`` and one stderr line; that line."""
    result = run_cli(*args, env=env)
    assert result.returncode == code, (args, result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    return lines[0]


def _tenant(live: Live, name: str = "acme") -> dict[str, str]:
    created: dict[str, str] = _ok("tenant", "create", name, env=live.env())
    return created


def _hook(live: Live) -> list[str]:
    return ["--url", f"{live.url}/healthz", "--method", "GET"]


def _status(url: str, token: str) -> int:
    request = urllib.request.Request(f"{url}/v1/schedules",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


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
    deadline = time.monotonic() + 30
    while True:
        page = _ok("runs", "list", "--schedule-id", created["id"], "--status", "succeeded",
                   "--limit", "1", env=env)
        if page["items"] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert page["items"], "no run was delivered within 30 s"
    run = _ok("runs", "get", page["items"][0]["id"], env=env)
    assert run["status"] == "succeeded" and run["schedule_id"] == created["id"]
    assert run["attempts"][0]["status_code"] == 200
    _ok("schedules", "delete", created["id"], env=env)


def test_every_schedule_command_round_trips_through_the_api(live: Live) -> None:
    env = live.env(_tenant(live)["token"])
    created = _ok("schedules", "create", "--name", "nightly", "--cron", "0 3 * * *",
                  "--timezone", "Europe/Berlin", *_hook(live), "--header", "x-a:1",
                  "--body", '{"k": 1}', "--max-attempts", "5",
                  "--initial-backoff-seconds", "7", "--misfire-policy", "skip", "--paused",
                  env=env)
    sid = created["id"]
    assert created["paused"] is True and created["misfire_policy"] == "skip"
    assert _ok("schedules", "get", sid, env=env)["timezone"] == "Europe/Berlin"
    listed = _ok("schedules", "list", "--all", "--limit", "1", env=env)
    assert [s["id"] for s in listed["items"]] == [sid] and listed["next_cursor"] is None

    # target and retry are replaced whole by the API: the CLI keeps what no flag names.
    updated = _ok("schedules", "update", sid, "--cron", "30 4 * * *", "--max-attempts", "2",
                  env=env)
    assert updated["cron"] == "30 4 * * *" and updated["retry"]["max_attempts"] == 2
    assert updated["retry"]["initial_backoff_seconds"] == 7
    assert updated["target"]["headers"] == {"x-a": "1"} and updated["target"]["body"]
    updated = _ok("schedules", "update", sid, "--header", "x-b:2", "--no-body", env=env)
    assert updated["target"]["headers"] == {"x-b": "2"} and updated["target"]["body"] is None
    assert updated["target"]["method"] == "GET"

    assert _ok("schedules", "resume", sid, env=env)["status"] == "active"
    assert _ok("schedules", "pause", sid, env=env)["status"] == "paused"
    run = _ok("schedules", "trigger", sid, env=env)
    assert run["trigger"] == "manual" and run["schedule_id"] == sid
    fires = _ok("schedules", "preview", sid, "--count", "3", env=env)["items"]
    assert len(fires) == 3 and all(f["utc"].endswith("Z") for f in fires)
    rotated = _ok("schedules", "rotate-secret", sid, env=env)
    assert rotated["signing_secret"] != created["signing_secret"]
    assert _ok("schedules", "delete", sid, env=env) == {"id": sid, "deleted": True}
    assert "not found" in _refused("schedules", "get", sid, env=env, code=1)


def test_api_refusals_print_the_apis_message_and_exit_1(live: Live) -> None:
    env = live.env(_tenant(live)["token"])
    assert _refused("schedules", "create", "--name", "x", "--cron", "61 * * * *",
                    *_hook(live), env=env, code=1).startswith("cronwire: cron: ")
    assert _refused("schedules", "create", "--name", "x", "--cron", "* * * * *",
                    *_hook(live), "--max-attempts", "9", env=env,
                    code=1).startswith("cronwire: retry.max_attempts: ")
    assert _refused("runs", "list", "--since", "yesterday", env=env,
                    code=1).startswith("cronwire: since: ")
    assert "not found" in _refused("runs", "get", str(uuid.uuid4()), env=env, code=1)
    assert "unknown or revoked token" in _refused("schedules", "list",
                                                  env=live.env("cwt_bogus"), code=1)


@pytest.mark.parametrize(
    "args",
    [["schedules", "get", "not-a-uuid"], ["schedules", "create", "--name", "x"],
     ["schedules", "create", "--name", "x", "--cron", "* * * * *", "--url", "http://a/",
      "--header", "no-colon"],
     ["schedules", "create", "--name", "x", "--cron", "* * * * *", "--url", "http://a/",
      "--misfire-policy", "sometimes"],
     ["schedules", "update", str(uuid.uuid4())], ["schedules", "frobnicate"],
     ["runs", "list", "--status", "done"], ["runs", "list", "--limit", "ten"],
     ["runs", "list", "--api-url", "ftp://example.com"], ["schedules"],
     ["tenant", "tokens", "nope"], ["tenant", "revoke", "nope"], ["tenant", "list", "extra"]],
)
def test_usage_errors_exit_2_with_one_line(
    args: list[str], live: Live, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # In-process (the parser and checks are the console script's own): a process per case
    # would cost a second each; the process-level exit path is covered by the tests above.
    for name in [n for n in os.environ if n.startswith(("SCHEDULER_", "CRONWIRE_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SCHEDULER_DATABASE_URL", live.dsn)
    monkeypatch.setenv("CRONWIRE_URL", live.url)
    monkeypatch.setenv("CRONWIRE_TOKEN", "cwt_any")
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_no_token_is_a_usage_error_and_no_server_is_one_line(live: Live) -> None:
    assert "CRONWIRE_TOKEN" in _refused("schedules", "list", env=live.env(), code=2)
    closed = f"http://127.0.0.1:{free_port()}"
    line = _refused("runs", "list", "--api-url", closed, env=live.env("cwt_any"), code=1)
    assert "connection refused" in line and closed in line


def test_a_terminal_gets_tables(live: Live) -> None:
    env = live.env(_tenant(live)["token"])
    created = _ok("schedules", "create", "--name", "tabled", "--cron", "0 3 * * *",
                  *_hook(live), "--paused", env=env)
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


def test_follow_prints_a_new_run_when_it_arrives(live: Live) -> None:
    env = live.env(_tenant(live)["token"])
    paused = _ok("schedules", "create", "--name", "followed", "--cron", "0 3 * * *",
                 *_hook(live), "--paused", env=env)  # no cron runs: only the one we trigger
    proc = subprocess.Popen(
        [cronwire_executable(), "runs", "list", "--follow", "--schedule-id", paused["id"],
         "--interval", "0.2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []],
                              daemon=True)
    reader.start()
    try:
        run = _ok("schedules", "trigger", paused["id"], env=env)
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 20
        while not any(r["id"] == run["id"] and r["status"] == "succeeded" for r in seen):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                seen.append(json.loads(lines.get(timeout=max(0.1, deadline - time.monotonic()))))
            except queue.Empty:
                raise AssertionError(f"--follow did not show the run succeed: {seen}") from None
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert {r["id"] for r in seen} == {run["id"]}  # one run, shown as it changed
    assert proc.returncode == 130 and "Traceback" not in err


def test_operators_list_tenants_and_tokens_and_revoke_on_every_replica(
    live: Live, module_database: str, tmp_path: Path,
) -> None:
    first = _tenant(live, "operated")
    second = _ok("tenant", "token", first["tenant_id"], env=live.env())
    _ok("schedules", "create", "--name", "counted", "--cron", "0 3 * * *", *_hook(live),
        "--paused", env=live.env(first["token"]))

    tenants = _ok("tenant", "list", "--json", env=live.env())
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
        assert "revoked" in _refused("schedules", "list", "--api-url", replica_b,
                                     env=live.env(first["token"]), code=1)
    finally:
        _stop(other)
    again = _ok("tenant", "revoke", tokens[0]["id"], env=live.env())
    assert again["revoked_at"] == revoked["revoked_at"]  # idempotent
    listed = _ok("tenant", "list", "--json", env=live.env())
    assert [t["live_tokens"] for t in listed if t["id"] == first["tenant_id"]] == [1]


def test_unknown_ids_name_the_database(live: Live) -> None:
    database = live.dsn.rsplit("/", 1)[-1]
    for args in (["tenant", "tokens", str(uuid.uuid4())], ["tenant", "revoke", str(uuid.uuid4())],
                 ["tenant", "token", str(uuid.uuid4())]):
        line = _refused(*args, env=live.env(), code=2)
        assert "does not exist in database postgresql://" in line and database in line


def test_embedded_database_commands_say_which_one_and_refuse_a_missing_one(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "elsewhere"
    line = _refused("tenant", "list", env=clean_env(SCHEDULER_HOME=str(missing)), code=2)
    assert f"no embedded database in {missing.resolve() / 'postgres'}" in line
    line = _refused("tenant", "token", str(uuid.uuid4()),
                    env=clean_env(SCHEDULER_HOME=str(missing)), code=2)
    assert not missing.exists(), "a read command created a database"

    home = tmp_path / "home"
    env = clean_env(SCHEDULER_HOME=str(home))
    created = run_cli("tenant", "create", "fresh", env=env)
    assert created.returncode == 0, created.stderr
    assert "creating a new, empty one" in created.stderr
    listed = run_cli("tenant", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    data_dir = home.resolve() / "postgres"
    assert f"cronwire: using the embedded database in {data_dir}" in listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)] == ["fresh"]
    line = _refused("tenant", "tokens", str(uuid.uuid4()), env=env, code=2)
    assert f"does not exist in the embedded database in {data_dir}" in line
