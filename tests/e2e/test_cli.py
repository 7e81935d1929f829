"""The `cronwire` command as users run it: real processes, real Postgres."""

from __future__ import annotations

import json
import logging
import os
import pwd
import signal
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from cronwire.bootstrap.startup import wait_for_database
from cronwire.domain.errors import ConfigError
from cronwire.loopback import free_port
from tests.support.processes import clean_env, cronwire_executable, run_cli, wait_http_ok
from tests.support.servers import with_database


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SCHEDULER_CLAIM_SOURCE", "rabbitmq"),
        ("SCHEDULER_DATABASE_URL", "mysql://root@localhost/db"),
        ("SCHEDULER_DATABASE_URL", "postgresql://db:port/x"),
        ("SCHEDULER_DATABASE_URL", "postgresql://h1:5432,h2:x/cw?target_session_attrs=read-write"),
        ("SCHEDULER_DATABASE_READ_URL", "postgresql://standby:5432/cw"),
        ("SCHEDULER_DELIVERY_TIMEOUT_SECONDS", "-3"),
    ],
)
@pytest.mark.parametrize("command", [["serve"], ["migrate"], ["tenant", "create", "acme"]])
def test_bad_configuration_exits_2_with_one_line(
    variable: str, value: str, command: list[str]
) -> None:
    result = run_cli(*command, env=clean_env(**{variable: value}))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_kafka_mode_with_an_unreachable_broker_exits_2_with_one_line(tmp_path: Path) -> None:
    silent = f"127.0.0.1:{free_port('127.0.0.1')}"
    result = run_cli("serve", env=clean_env(SCHEDULER_CLAIM_SOURCE="kafka",
                                             SCHEDULER_KAFKA_BOOTSTRAP_SERVERS=silent,
                                             SCHEDULER_HOME=str(tmp_path)))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"cronwire: SCHEDULER_KAFKA_BOOTSTRAP_SERVERS: no Kafka broker answers at {silent}"
    ]
    assert not (tmp_path / "postgres").exists()  # nothing was started


def test_a_taken_port_is_one_line_and_exit_2_before_anything_starts(tmp_path: Path) -> None:
    """Found by a first user: serve started Postgres and migrated, then exited 3, with the port taken."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", env=clean_env(SCHEDULER_HOME=str(tmp_path / "home"),
                                                 SCHEDULER_HTTP_PORT=str(port)))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"cronwire: SCHEDULER_HTTP_PORT: 127.0.0.1:{port} is already in use (another "
        "`cronwire serve`?); stop that process or set SCHEDULER_HTTP_PORT to a free port"]
    assert not (tmp_path / "home").exists()  # no Postgres started, nothing migrated


def test_a_database_that_refuses_us_is_one_line_naming_the_variable(admin_dsn: str) -> None:
    missing = with_database(admin_dsn, f"cw_missing_{uuid.uuid4().hex[:8]}")
    result = run_cli("serve", env=clean_env(SCHEDULER_DATABASE_URL=missing,
                                             SCHEDULER_HTTP_PORT=str(free_port())))
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("cronwire: SCHEDULER_DATABASE_URL: postgresql://")
    assert "does not exist" in line and "Traceback" not in result.stderr


async def test_waiting_for_a_database_says_what_it_tries_then_names_the_variable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed = f"postgresql://cronwire:hunter2@127.0.0.1:{free_port()}/cronwire"
    with caplog.at_level(logging.INFO, logger="cronwire"), \
            pytest.raises(ConfigError) as gave_up:
        await wait_for_database(closed, within=1.5)
    message = str(gave_up.value)
    assert message.startswith("SCHEDULER_DATABASE_URL: no database answers at ")
    assert "connection refused" in message and "tried for 1.5 s" in message
    said = [r.getMessage() for r in caplog.records if "waiting for the database" in r.getMessage()]
    assert said and "connection refused" in said[0] and "SCHEDULER_DATABASE_URL" in said[0]
    assert "hunter2" not in message + "".join(said)


async def test_waiting_for_a_database_reads_a_failover_pairs_url_as_the_pools_do(
    admin_dsn: str,
) -> None:
    """Several hosts (the first one gone), a connect_timeout and target_session_attrs: the
    URL `serve` then uses. The wait used asyncpg alone, which sends a parameter
    it does not know (connect_timeout) to the server as a setting: refused for 15 s, then
    "no database answers"."""
    real = admin_dsn.split("@", 1)[1].split("/", 1)[0]
    pair = admin_dsn.replace(real, f"127.0.0.1:{free_port()},{real}")
    await wait_for_database(f"{pair}?connect_timeout=5&target_session_attrs=read-write",
                            within=60)


@pytest.mark.parametrize(
    "args",
    [["--help"], ["serve", "--help"], ["migrate", "--help"], ["tenant", "--help"],
     ["tenant", "create", "--help"], ["tenant", "token", "--help"]],
)
def test_every_command_has_help(args: list[str]) -> None:
    result = run_cli(*args, env=clean_env())
    assert result.returncode == 0 and "usage: cronwire" in result.stdout


@pytest.mark.parametrize(
    "args",
    [[], ["frobnicate"], ["tenant"], ["tenant", "token", "not-a-uuid"], ["tenant", "create"],
     ["loadtest", "--schedules", "0"],
     ["loadtest", "--sink-failure-rate", "2"], ["loadtest", "--scenario", "spike"],
     ["loadtest", "--cron", "61 * * * *"], ["loadtest", "--replicas", "many"],
     ["loadtest", "--sink", "apache"], ["loadtest", "--sink", "nginx", "--sink-latency-ms", "5"]],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], database_url: str) -> None:
    result = run_cli(*args, env=clean_env(SCHEDULER_DATABASE_URL=database_url))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_tenant_create_and_token_print_contract_json(database_url: str) -> None:
    env = clean_env(SCHEDULER_DATABASE_URL=database_url)
    created = run_cli("tenant", "create", "acme", env=env)
    assert created.returncode == 0, created.stderr
    first = json.loads(created.stdout.strip().splitlines()[-1])
    assert set(first) == {"tenant_id", "name", "token"} and first["name"] == "acme"
    uuid.UUID(first["tenant_id"])
    again = run_cli("tenant", "token", first["tenant_id"], env=env)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["tenant_id"] == first["tenant_id"] and second["token"] != first["token"]
    unknown = run_cli("tenant", "token", str(uuid.uuid4()), env=env)
    assert unknown.returncode == 2 and "does not exist" in unknown.stderr


def test_migrate_is_idempotent(database_url: str) -> None:
    env = clean_env(SCHEDULER_DATABASE_URL=database_url)
    result = run_cli("migrate", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"applied": []}


def _as_user(user: str | None) -> dict[str, object]:
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _serve(home: Path, port: int, user: str | None = None) -> subprocess.Popen[str]:
    env = clean_env(SCHEDULER_HOME=str(home), SCHEDULER_HTTP_PORT=str(port))
    return subprocess.Popen(  # type: ignore[call-overload]
        [cronwire_executable(), "serve"], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=str(home.parent), **_as_user(user),
    )


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def test_serve_on_embedded_postgres_is_healthy_stops_cleanly_and_keeps_data(
    server_dir: Path,
) -> None:
    home = server_dir / "home"
    port = free_port()
    proc = _serve(home, port)
    try:
        waited = wait_http_ok(f"http://127.0.0.1:{port}/healthz", 15, proc)
        wait_http_ok(f"http://127.0.0.1:{port}/readyz", 15, proc)
        created = run_cli("tenant", "create", "kept", env=clean_env(SCHEDULER_HOME=str(home)))
        assert created.returncode == 0, created.stderr
    finally:
        code, err = _stop(proc)
    assert code == 0, err
    embedded_lines = [line for line in err.splitlines() if "embedded postgres (no" in line]
    assert len(embedded_lines) == 1 and "listening on 127.0.0.1:" in embedded_lines[0]
    assert "postgresql://" not in err  # a DSN may hold a password: never logged
    assert len([line for line in err.splitlines() if "startup.dev_mode" in line]) == 1
    serving = next(json.loads(line)["message"] for line in err.splitlines() if " serving " in line)
    base = f"http://127.0.0.1:{port}"
    assert f"console {base}/console, API docs {base}/docs" in serving
    assert not (home / "postgres" / "postmaster.pid").exists(), "embedded server left running"
    print(f"time to healthy: {waited:.2f}s")

    tenant_id = json.loads(created.stdout)["tenant_id"]
    proc = _serve(home, port)
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/readyz", 15, proc)
        again = run_cli("tenant", "token", tenant_id, env=clean_env(SCHEDULER_HOME=str(home)))
        assert again.returncode == 0, again.stderr  # the data survived the restart
    finally:
        code, err = _stop(proc)
    assert code == 0, err


def interpreter_usable_by(user: str, executable: str | None = None) -> bool:
    """True when ``user`` can start ``executable`` (this venv's ``cronwire``). Only root can
    switch users; an interpreter under a private (0700) home is out of another user's
    reach, which is an answer (False), not an error."""
    if os.geteuid() != 0:
        return False
    try:
        probe = subprocess.run([executable or cronwire_executable(), "--help"],
                               capture_output=True, check=False, timeout=60, **_as_user(user))
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def test_probe_of_an_interpreter_out_of_reach_is_false_not_an_error(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can start a process as another user")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    script = private / "probe"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    assert interpreter_usable_by("nobody", str(script)) is False


def test_serve_works_as_a_normal_user(server_dir: Path) -> None:
    # Probed here, not at collection time: a probe that raised there stopped the module.
    if os.geteuid() != 0:
        pytest.skip("not root: this whole run is already a normal user's")
    if not interpreter_usable_by("nobody"):
        pytest.skip(f"the user 'nobody' cannot reach {cronwire_executable()} (its "
                    "interpreter lives in a private directory); run as a normal user instead")
    user = pwd.getpwnam("nobody")
    home = server_dir / "home"
    home.mkdir()
    os.chown(home, user.pw_uid, user.pw_gid)
    for parent in [server_dir, *server_dir.parents]:
        parent.chmod(parent.stat().st_mode | 0o005)
    port = free_port()
    proc = _serve(home / "data", port, user="nobody")
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/readyz", 30, proc)
    finally:
        code, err = _stop(proc)
    assert code == 0, err
