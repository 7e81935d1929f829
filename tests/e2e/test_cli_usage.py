"""The console script's own contract, whatever the command: `--version` is the installed
one, a usage error exits 2 with one line, a refusal by the API exits 1 with the API's
message, and a missing token or a server that does not answer is one line. Real
processes against a live `cronwire serve` (one per module, all roles, see conftest.py).
"""

from __future__ import annotations

import uuid

import pytest

from cronwire.loopback import free_port
from cronwire.version import version
from tests.support.cli_shell import InProcess, Live
from tests.support.cli_shell import hook as _hook
from tests.support.cli_shell import new_tenant as _tenant
from tests.support.cli_shell import refused as _refused
from tests.support.processes import clean_env, run_cli


def test_version_is_the_installed_one() -> None:
    result = run_cli("--version", env=clean_env())
    assert result.returncode == 0 and result.stdout.strip() == f"cronwire {version()}"


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
