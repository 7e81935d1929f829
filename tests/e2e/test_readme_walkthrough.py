"""The README's walkthrough, run as written (its first schedule was once refused).

The server is started as the README's first command starts it: `cronwire serve` with no
configuration, except a free port (SCHEDULER_HTTP_PORT) and a home of the test's own. Then
every command of "A first schedule" runs in order, read from README.md itself, so a change
to the README that the server does not follow fails here. The one liberty taken: the
README's port 8080 becomes the test's port, in the commands and as CRONWIRE_URL."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cronwire.loopback import free_port
from tests.support.cli_shell import follow_runs
from tests.support.processes import clean_env, cronwire_executable, run_cli, wait_http_ok

README = Path(__file__).resolve().parents[2] / "README.md"
README_ADDRESS = "127.0.0.1:8080"


def _blocks(text: str) -> list[str]:
    return re.findall(r"^```\w*\n(.*?)\n```", text, re.M | re.S)


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def serve_command() -> list[str]:
    """The server half of the README's first command (`pip install ... && cronwire serve`)."""
    first = _blocks(README.read_text(encoding="utf-8"))[0]
    argv = shlex.split(first.split("&&")[-1])
    assert argv[0] == "cronwire", first
    return argv[1:]


def walkthrough() -> tuple[list[list[str]], str]:
    """The commands of "A first schedule" (continuations joined, comments dropped) and the
    section's text."""
    section = _section(README.read_text(encoding="utf-8"), "A first schedule")
    script = _blocks(section)[0].replace("\\\n", " ")
    commands = [shlex.split(line, comments=True) for line in script.splitlines()]
    return [argv for argv in commands if argv], section


class Server:
    def __init__(self, home: Path, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.env = clean_env(SCHEDULER_HOME=str(home), SCHEDULER_HTTP_PORT=str(port))
        self.cwd = home.parent
        self.log = home.parent / "serve.log"


@pytest.fixture
def server(server_dir: Path) -> Iterator[Server]:
    started = Server(server_dir / ".cronwire", free_port())
    with started.log.open("w") as log:
        proc = subprocess.Popen([cronwire_executable(), *serve_command()], env=started.env,
                                cwd=started.cwd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        wait_http_ok(f"{started.url}/readyz", 120, proc)  # type: ignore[arg-type]
        yield started
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, started.log.read_text()[-3000:]


def test_the_readme_walkthrough_works_as_written(server: Server) -> None:
    commands, section = walkthrough()
    env = {**server.env, "CRONWIRE_URL": server.url}
    said: dict[str, Any] = {}
    ran = []
    for argv in commands:
        argv = [arg.replace(README_ADDRESS, server.url.removeprefix("http://")) for arg in argv]
        if argv[0] == "export":
            name, _, value = argv[1].partition("=")
            if value.endswith("..."):  # a placeholder: the value printed by a command above
                value = next(v for v in said.values()
                             if isinstance(v, str) and v.startswith(value.removesuffix("...")))
            env[name] = value
        elif argv[:4] == ["cronwire", "runs", "list", "--follow"]:
            # Until a run succeeds (*/10 s: within 10 s, later on a busy machine), then
            # Ctrl-C, as the README says ("Ctrl-C stops").
            with follow_runs(argv[4:], env, server.cwd) as followed:
                followed.wait_for(lambda runs: any(r["status"] == "succeeded" for r in runs))
            assert followed.returncode == 130, followed.stderr
            assert "Traceback" not in followed.stderr
        elif argv[0] == "cronwire":
            done = run_cli(*argv[1:], env=env, timeout=120)
            assert done.returncode == 0, (argv, done.stderr)
            said = json.loads(done.stdout)
        else:
            raise AssertionError(f"the README's walkthrough has a command this test does not "
                                 f"know how to run: {argv}")
        ran.append(" ".join(argv[:3]))
    # What the walkthrough is about happened: a tenant, its token, a schedule, its runs.
    assert {"cronwire tenant create", "cronwire schedules create", "cronwire runs list"} <= set(ran)
    assert env["CRONWIRE_TOKEN"].startswith("cwt_") and len(env["CRONWIRE_TOKEN"]) > 10

    # The addresses the section names: the server's own address (it leads to the
    # console), the OpenAPI document and the interactive docs.
    addresses = re.findall(r"<(http://[^>]+)>", section) + [
        f"http://{README_ADDRESS}{path}" for path in re.findall(r"`(/[a-z.]+)`", section)
        if path != "/v1"]
    assert len(addresses) >= 3, addresses
    for address in addresses:
        with urllib.request.urlopen(address.replace(README_ADDRESS, server.url[7:]),
                                    timeout=30) as answer:
            assert answer.status == 200, address
    log = server.log.read_text()
    assert "dev mode (embedded database, API on loopback only)" in log
    assert f"console {server.url}/console, API docs {server.url}/docs" in log
