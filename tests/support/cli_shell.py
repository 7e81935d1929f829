"""A live `cronwire serve` and the ways the command-line tests (tests/e2e/test_cli_*.py,
their fixtures in tests/e2e/conftest.py) call the CLI on it: as a real process (run_cli)
or in this process (:class:`InProcess`)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cronwire.cli.main import main
from cronwire.harness.fleet import HARNESS_SECRET_KEYS
from tests.support.processes import (
    clean_env,
    cronwire_executable,
    run_cli,
    stop_process,
    wait_http_ok,
)


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


def spawn_serve(dsn: str, port: int, roles: str, log: Path) -> subprocess.Popen[bytes]:
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
        stop_process(proc)
        raise AssertionError(log.read_text(errors="replace")[-3000:]) from None
    return proc

def ok(*args: str, env: dict[str, str]) -> Any:
    """Run a CLI command that must succeed; its stdout (JSON when piped) parsed."""
    result = run_cli(*args, env=env)
    assert result.returncode == 0, (args, result.stderr)
    return json.loads(result.stdout) if result.stdout.strip() else None


def refused(*args: str, env: dict[str, str], code: int) -> str:
    """Run a CLI command that must fail with ``code`` and one stderr line; that line."""
    result = run_cli(*args, env=env)
    assert result.returncode == code, (args, result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    return lines[0]

class InProcess:
    """The console script's ``main`` in this process, on the live server and database:
    the same parser, client and exit codes without a second of interpreter start-up per
    call. Tests that need the real process (exit status, terminal, signals) use run_cli."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                 live: Live) -> None:
        self._env, self._capsys = monkeypatch, capsys
        for name in [n for n in os.environ if n.startswith(("SCHEDULER_", "CRONWIRE_"))]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("SCHEDULER_DATABASE_URL", live.dsn)
        monkeypatch.setenv("SCHEDULER_SECRET_KEYS", HARNESS_SECRET_KEYS)
        monkeypatch.setenv("CRONWIRE_URL", live.url)

    def run(self, *args: str, token: str | None = None) -> tuple[int, str, str]:
        if token is None:
            self._env.delenv("CRONWIRE_TOKEN", raising=False)
        else:
            self._env.setenv("CRONWIRE_TOKEN", token)
        self._capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        out, err = self._capsys.readouterr()
        return code, out, err

    def ok(self, *args: str, token: str | None = None) -> Any:
        code, out, err = self.run(*args, token=token)
        assert code == 0, (args, err)
        return json.loads(out) if out.strip() else None

    def refused(self, *args: str, code: int, token: str | None = None) -> str:
        got, out, err = self.run(*args, token=token)
        assert got == code and out == "", (args, got, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        return lines[0]

def new_tenant(live: Live, name: str = "acme") -> dict[str, str]:
    created: dict[str, str] = ok("tenant", "create", name, env=live.env())
    return created


def hook(live: Live) -> list[str]:
    return ["--url", f"{live.url}/healthz", "--method", "GET"]


def status(url: str, token: str) -> int:
    request = urllib.request.Request(f"{url}/v1/schedules",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


class FollowedRuns:
    """`cronwire runs list --follow` running as a process, its JSON lines read as they
    come (see :func:`follow_runs`)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.seen: list[dict[str, Any]] = []
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(
            target=lambda: [self._lines.put(line) for line in proc.stdout or []], daemon=True)
        self._reader.start()
        self.returncode: int | None = None
        self.stderr = ""

    def wait_for(self, shown: Callable[[list[dict[str, Any]]], bool],
                 within: float = 120) -> list[dict[str, Any]]:
        """Read runs until ``shown(runs so far)``; generous by default (a loaded 2-core
        machine delivers late), and it returns as soon as they show."""
        deadline = time.monotonic() + within
        while not shown(self.seen):
            assert self.proc.poll() is None, "--follow exited early"
            try:
                line = self._lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"--follow did not show it: {self.seen}") from None
            self.seen.append(json.loads(line))
        return self.seen

    def interrupt(self) -> None:
        """Ctrl-C, as the README says ("Ctrl-C stops"); the pipes end read and closed (the
        reader thread owns stdout, so not communicate())."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=120)  # an exit, not a timing: generous
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=30)
        assert self.proc.stderr is not None and self.proc.stdout is not None
        self.stderr = self.proc.stderr.read()
        self.proc.stderr.close()
        self.proc.stdout.close()
        self.returncode = self.proc.returncode


@contextlib.contextmanager
def follow_runs(args: list[str], env: dict[str, str],
                cwd: Path | None = None) -> Iterator[FollowedRuns]:
    """`cronwire runs list --follow ...args` (JSON lines: stdout is a pipe), interrupted
    with SIGINT on the way out whatever happened."""
    proc = subprocess.Popen([cronwire_executable(), "runs", "list", "--follow", *args], env=env,
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    followed = FollowedRuns(proc)
    try:
        yield followed
    finally:
        followed.interrupt()
