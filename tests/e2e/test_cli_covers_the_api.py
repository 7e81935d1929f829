"""docs/cli.md says everything the API does can be done from the CLI (there
once was no `flow-control` command and no `--burst`). This walks the operations of a live
`cronwire serve`'s /openapi.json and fails, by name, for any the table below does not map
to a CLI command; the commands and flags it names must exist in the CLI. `flow-control`
and `--burst` are then used against the live API, as a user would."""

from __future__ import annotations

import argparse
import json
from typing import Any

import httpx

from cronwire.cli.main import build_parser
from tests.support.cli_shell import InProcess, Live
from tests.support.cli_shell import hook as _hook

# (method, path) -> the CLI command and, where the API's input is a body field the CLI
# maps to a flag of its own, those flags. Operator and machine routes say why not.
NOT_TENANT_COMMANDS = {
    ("GET", "/healthz"): "a probe for the orchestrator",
    ("GET", "/readyz"): "a probe for the orchestrator",
    ("GET", "/metrics"): "Prometheus scrapes it",
}
COMMANDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("GET", "/v1/schedules"): ("schedules", "list"),
    ("POST", "/v1/schedules"): ("schedules", "create", "--flow-key", "--max-concurrency",
                                "--rate-per-second", "--burst", "--exclude-calendar",
                                "--calendar-policy"),
    ("GET", "/v1/schedules/{id}"): ("schedules", "get"),
    ("PATCH", "/v1/schedules/{id}"): ("schedules", "update", "--flow-key",
                                      "--max-concurrency", "--rate-per-second", "--burst",
                                      "--no-flow-control", "--exclude-calendar",
                                      "--calendar-policy", "--no-calendars"),
    ("DELETE", "/v1/schedules/{id}"): ("schedules", "delete"),
    ("POST", "/v1/schedules/{id}/pause"): ("schedules", "pause"),
    ("POST", "/v1/schedules/{id}/resume"): ("schedules", "resume"),
    ("POST", "/v1/schedules/{id}/trigger"): ("schedules", "trigger"),
    ("POST", "/v1/schedules/{id}/rotate-secret"): ("schedules", "rotate-secret"),
    ("GET", "/v1/schedules/{id}/preview"): ("schedules", "preview"),
    ("POST", "/v1/schedules/{id}/backfill"): ("schedules", "backfill"),
    ("GET", "/v1/schedules/{id}/stats"): ("schedules", "stats"),
    ("GET", "/v1/schedules/{id}/explain"): ("schedules", "explain"),
    ("GET", "/v1/runs"): ("runs", "list"),
    ("GET", "/v1/runs/{id}"): ("runs", "get"),
    ("POST", "/v1/runs/{id}/replay"): ("runs", "replay"),
    ("POST", "/v1/runs/replay"): ("runs", "replay", "--status", "--schedule-id"),
    ("PUT", "/v1/alerts"): ("alerts", "set"),
    ("GET", "/v1/alerts"): ("alerts", "get"),
    ("GET", "/v1/alerts/events"): ("alerts", "events"),
    ("GET", "/v1/flow-control"): ("flow-control",),
    ("GET", "/v1/schedules/{id}/revisions"): ("schedules", "revisions"),
    ("POST", "/v1/schedules/{id}/revisions/{version}/restore"): ("schedules", "restore"),
    ("POST", "/v1/tokens"): ("tokens", "create", "--name", "--scope", "--expires-in"),
    ("GET", "/v1/tokens"): ("tokens", "list"),
    ("DELETE", "/v1/tokens/{id}"): ("tokens", "revoke"),
    ("GET", "/v1/audit"): ("audit", "list", "--since", "--until", "--object-id", "--action"),
    ("POST", "/v1/schedules/apply"): ("apply", "--managed-by", "--prune", "--dry-run"),
    # PUT by key is one schedule's apply: `cronwire apply -f one.yaml` does it.
    ("PUT", "/v1/schedules/by-key/{key}"): ("apply", "--file"),
    ("GET", "/v1/schedules/by-key/{key}"): ("schedules", "get-key"),
    ("DELETE", "/v1/schedules/by-key/{key}"): ("schedules", "delete-key"),
    ("POST", "/v1/calendars"): ("calendars", "create", "--name", "--date", "--country",
                                "--subdivision", "--year"),
    ("GET", "/v1/calendars"): ("calendars", "list"),
    ("GET", "/v1/calendars/{id}"): ("calendars", "get"),
    ("PATCH", "/v1/calendars/{id}"): ("calendars", "update", "--name", "--date", "--country",
                                      "--year", "--no-dates"),
    ("DELETE", "/v1/calendars/{id}"): ("calendars", "delete"),
}


def _operations(live: Live) -> list[tuple[str, str]]:
    spec = httpx.get(f"{live.url}/openapi.json", timeout=30).json()
    return sorted((method.upper(), path) for path, item in spec["paths"].items()
                  for method in item if method in {"get", "post", "put", "patch", "delete"})


def _subcommand(parser: argparse.ArgumentParser, words: list[str]) -> argparse.ArgumentParser:
    """The parser of `cronwire WORDS...`, or an AssertionError naming the missing word."""
    for word in words:
        sub = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        assert sub and word in sub[0].choices, f"`cronwire {' '.join(words)}`: no {word!r}"
        parser = sub[0].choices[word]
    return parser


def test_every_api_operation_has_a_cli_command(live: Live) -> None:
    operations = _operations(live)
    assert ("GET", "/v1/flow-control") in operations  # the walk sees the tenant routes
    unmapped = [f"{m} {p}" for m, p in operations
                if (m, p) not in COMMANDS and (m, p) not in NOT_TENANT_COMMANDS]
    assert not unmapped, f"API operations no CLI command covers: {', '.join(unmapped)}"
    gone = [f"{m} {p}" for m, p in COMMANDS if (m, p) not in operations]
    assert not gone, f"mapped operations the API no longer has: {', '.join(gone)}"
    root = build_parser()
    for (method, path), mapped in COMMANDS.items():
        words = [w for w in mapped if not w.startswith("--")]
        parser = _subcommand(root, words)
        flags = {o for a in parser._actions for o in a.option_strings}
        missing = [f for f in mapped if f.startswith("--") and f not in flags]
        assert not missing, f"{method} {path}: `cronwire {' '.join(words)}` lacks {missing}"


def test_flow_control_and_burst_from_the_shell(live: Live, cli: InProcess) -> None:
    token = cli.ok("tenant", "create", "flows")["token"]
    created: dict[str, Any] = cli.ok(
        "schedules", "create", "--name", "metered", "--cron", "0 3 * * *", *_hook(live),
        "--paused", "--flow-key", "billing", "--rate-per-second", "2", "--burst", "7",
        token=token)
    assert created["flow_control"]["burst"] == 7
    updated = cli.ok("schedules", "update", created["id"], "--burst", "3", token=token)
    assert updated["flow_control"] == {**created["flow_control"], "burst": 3}
    assert "burst" in cli.refused("schedules", "update", created["id"], "--burst", "0",
                                  token=token, code=1)
    keys = cli.ok("flow-control", token=token)
    assert [k["key"] for k in keys["items"]] == ["billing"]
    assert keys["items"][0]["rate_per_second"] == 2
    assert cli.ok("flow-control", "--key", "other", token=token)["items"] == []
    assert json.dumps(keys)  # what the API answered, printed as JSON when piped
