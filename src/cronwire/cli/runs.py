"""Tenant commands: `cronwire runs list|get`, the run history over the /v1 API (and
`runs list --follow`, which polls it). Output and flags as for `cronwire schedules`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cronwire.cli.api_client import (
    ApiClient,
    ApiFailure,
    client_command,
    id_argument,
    pages,
    seconds_flag,
    uuid_flag,
)
from cronwire.cli.output import (
    Column,
    field,
    print_json,
    render_fields,
    render_table,
    show,
    show_page,
    stream_header,
    stream_row,
    wants_json,
)
from cronwire.cli.scheduling import add_replay_command, run_status
from cronwire.domain.errors import ConfigError
from cronwire.domain.history import MAX_PAGE

RUN_STATUSES = ("pending", "running", "retrying", "succeeded", "failed", "skipped", "cancelled")
RUN_COLUMNS = [
    Column("ID", field("id"), 36), Column("SCHEDULE", field("schedule_id"), 36),
    Column("SCHEDULED FOR (UTC)", field("scheduled_for"), 20),
    Column("STATUS", run_status, 19), Column("ATTEMPTS", field("attempt_count")),
    Column("CODE", field("last_status_code"), 4), Column("TRIGGER", field("trigger"), 8),
    Column("ERROR", field("last_error")),
]
ATTEMPT_COLUMNS = [
    Column("ATTEMPT", field("attempt")), Column("STARTED (UTC)", field("started_at")),
    Column("OUTCOME", field("outcome")), Column("CODE", field("status_code")),
    Column("MS", field("duration_ms")), Column("ERROR", field("error")),
    Column("RESPONSE", field("response_excerpt")),
]


def _run_filters(args: argparse.Namespace) -> dict[str, Any]:
    return {"schedule_id": args.schedule_id, "status": args.status, "since": args.since,
            "until": args.until}


def runs_list(client: ApiClient, args: argparse.Namespace) -> None:
    if args.follow:
        if args.cursor:
            raise ConfigError("--cursor: not with --follow, which watches the newest runs")
        if args.all:
            raise ConfigError("--all: not with --follow, which watches the newest runs")
        follow_runs(client, args)
        return
    params = {**_run_filters(args), "limit": args.limit, "cursor": args.cursor}
    show_page(args, pages(client, "/v1/runs", params, args.all), RUN_COLUMNS)


def follow_runs(client: ApiClient, args: argparse.Namespace) -> None:
    """Print the newest ``--limit`` runs oldest first, then each run that appears or changes
    status, polling every ``--interval`` seconds until interrupted. JSON: one run a line."""
    as_json = wants_json(args.json)
    if not as_json:
        print(stream_header(RUN_COLUMNS), flush=True)
    seen: dict[str, str] = {}
    horizon: datetime | None = None  # runs older than the first page were not asked for
    limit = args.limit
    while True:
        try:
            page = client.call("GET", "/v1/runs", params={**_run_filters(args), "limit": limit})
        except ApiFailure as failure:
            if failure.retry_after is None:
                raise
            # A dependency outage (503): a watch outlives it, as Retry-After asks.
            wait = max(failure.retry_after, args.interval)
            print(f"{failure}; following again in {wait:g}s", file=sys.stderr, flush=True)
            time.sleep(wait)
            continue
        latest: dict[str, str] = {}
        for run in reversed(page["items"]):
            run_id, status = run["id"], run["status"]
            if run_id not in seen and horizon is not None and _instant(run) < horizon:
                continue
            latest[run_id] = status
            if seen.get(run_id) != status:
                if as_json:
                    print_json(run, compact=True)
                else:
                    print(stream_row(run, RUN_COLUMNS), flush=True)
        if limit == args.limit and len(page["items"]) >= args.limit:
            horizon = _instant(page["items"][-1])
        # Only the newest page can change: a run that left it never comes back.
        seen, limit = latest, MAX_PAGE
        time.sleep(args.interval)


def _instant(run: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(str(run["scheduled_for"]))


def runs_get(client: ApiClient, args: argparse.Namespace) -> None:
    def render(run: Mapping[str, Any]) -> str:
        attempts = run.get("attempts") or []
        text = render_fields(run)
        if attempts:
            text += "\n\n" + render_table(attempts, ATTEMPT_COLUMNS)
        return text

    show(args, client.call("GET", f"/v1/runs/{args.id}"), render)


def add_run_commands(commands: argparse._SubParsersAction[Any], api: argparse.ArgumentParser,
                     group_help: str) -> None:
    """`runs list|get` as a top-level command of `cronwire`; ``api`` holds the
    connection flags shared with `schedules`."""
    runs = commands.add_parser("runs", help="tenants: the run history over the API",
                               description="The run history over the API. " + group_help)
    run_actions = runs.add_subparsers(dest="runs_command", required=True,
                                      parser_class=type(runs), metavar="ACTION")
    run_list = run_actions.add_parser(
        "list", parents=[api], help="list runs, newest scheduled_for first",
        description="List runs, newest scheduled_for first. With --follow, keep watching: "
        "new runs and status changes are printed as they happen (JSON: one run per line).")
    run_list.set_defaults(handler=client_command(runs_list))
    run_list.add_argument("--schedule-id", type=uuid_flag, metavar="ID",
                          help="only this schedule's runs (default: all schedules)")
    run_list.add_argument("--status", choices=RUN_STATUSES, help="only runs in this status")
    run_list.add_argument("--since", metavar="TIME",
                          help="RFC 3339; scheduled_for at or after it (default: no bound)")
    run_list.add_argument("--until", metavar="TIME",
                          help="RFC 3339; scheduled_for before it (default: no bound)")
    run_list.add_argument("--limit", type=int, default=50, metavar="N",
                          help=f"runs per page, 1..{MAX_PAGE} (default: 50)")
    run_list.add_argument("--cursor", metavar="CURSOR",
                          help="continue after this page (next_cursor of the previous one)")
    run_list.add_argument("--all", action="store_true",
                          help="follow every page to the end (newest scheduled_for first; "
                               "not with --follow)")
    run_list.add_argument("--follow", "-f", action="store_true",
                          help="keep printing new runs and status changes until Ctrl-C")
    run_list.add_argument("--interval", type=seconds_flag, default=2.0, metavar="SECONDS",
                          help="with --follow, seconds between polls (default: 2)")
    run_get = run_actions.add_parser("get", parents=[api], help="one run with its attempts",
                                     description="One run with its delivery attempts.")
    run_get.set_defaults(handler=client_command(runs_get))
    id_argument(run_get, "run")
    add_replay_command(run_actions, api)
