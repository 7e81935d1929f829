"""The operator's `cronwire tenant list|token|tokens|revoke` against the database: a
revoked token is refused at once on every replica, an unknown id names the database, an
unreachable database is one line and exit 1, and the embedded database says which one it
used. Real processes, real Postgres (a live `cronwire serve` per module, see conftest.py).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from cronwire.adapters.embedded.postgres import EmbeddedPostgres
from cronwire.cli.main import main
from cronwire.loopback import free_port
from tests.support.cli_shell import InProcess, Live
from tests.support.cli_shell import hook as _hook
from tests.support.cli_shell import ok as _ok
from tests.support.cli_shell import refused as _refused
from tests.support.cli_shell import spawn_serve as _spawn
from tests.support.cli_shell import status as _status
from tests.support.processes import clean_env, run_cli, stop_process


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


def test_a_tenant_name_must_show_something_and_hide_nothing(live: Live, cli: InProcess) -> None:
    # CONTRACT.md, "Tenant isolation in depth": names need a visible character; Unicode
    # control and format characters are refused. One line, exit 2, nothing written.
    before = cli.ok("tenant", "list", "--json")
    for name in ("\u200b", "\u202eevil\u202c", "\u3164", "  ", "two\nlines"):
        line = cli.refused("tenant", "create", name, code=2)
        assert line.startswith("cronwire: NAME: must "), line
    assert cli.ok("tenant", "list", "--json") == before
    assert cli.ok("tenant", "create", "Société Générale 東京")["name"] == "Société Générale 東京"


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
    never a DSN or a port (they once printed two INFO lines with both)."""
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
