"""Tenant commands: `cronwire schedules ...` (and, from runs.py, `cronwire runs ...`),
an HTTP client of /v1.

The API is the only authority: these commands build request bodies from flags named
after the API's fields and print what the API answers. An API refusal prints the API's
own message (it names the field) and exits 1; a flag the CLI can check itself (an id that
is not a UUID, a header without a colon) is a usage error, exit 2, before any request.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from cronwire.cli.access import add_revision_actions, if_match
from cronwire.cli.api_client import (
    GROUP_HELP,
    ApiClient,
    Handler,
    client_command,
    connection_options,
    id_argument,
    pages,
)
from cronwire.cli.as_code import add_as_code_commands, add_key_actions
from cronwire.cli.calendars import calendar_fields
from cronwire.cli.client_tls import TLS_FLAGS, tls_fields
from cronwire.cli.flow_control import flow_fields
from cronwire.cli.observability import (
    add_alert_commands,
    add_schedule_insight,
    alert_rules_body,
)
from cronwire.cli.output import (
    Column,
    field,
    render_fields,
    render_table,
    show,
    show_page,
    wants_json,
)
from cronwire.cli.runs import add_run_commands
from cronwire.cli.schedule_flags import CREATE_EXAMPLES, schedule_flags
from cronwire.cli.scheduling import (
    add_schedule_actions,
    semantics_fields,
    timetable,
)
from cronwire.domain.errors import ConfigError

# ---- output --------------------------------------------------------------------------

SCHEDULE_COLUMNS = [
    Column("ID", field("id")), Column("NAME", field("name")), Column("CRON", timetable),
    Column("TIMEZONE", field("timezone")), Column("STATUS", field("status")),
    Column("NEXT FIRE (UTC)", field("next_fire_at")),
    Column("URL", lambda s: s.get("target", {}).get("url")),
]
def _calendar_note(item: Mapping[str, Any]) -> str:
    if item.get("skipped"):
        return f"skipped ({item.get('calendar')})"
    if item.get("shifted_from"):
        return f"moved from {item['shifted_from']} ({item.get('calendar')})"
    return ""


PREVIEW_COLUMNS = [Column("UTC", field("utc")), Column("LOCAL", field("local")),
                   Column("CALENDAR", _calendar_note)]


# ---- schedules -----------------------------------------------------------------------


def _target_and_retry(args: argparse.Namespace,
                      current: Mapping[str, Any] | None) -> dict[str, Any]:
    """The `target` and `retry` objects the flags change, starting from the schedule's
    current values (``current``) on an update. PATCH merges both (RFC 7396), so sending
    unchanged members again is harmless."""
    body: dict[str, Any] = {}  # a read's tls (subject, expiry) is not sent back unchanged
    before = {k: v for k, v in current["target"].items() if k != "tls"} if current else {}
    target = dict(before)
    given = {"url": args.url, "method": args.method, "body": args.body}
    target.update({k: v for k, v in given.items() if v is not None})
    target.update(tls_fields(args))
    if args.header is not None:
        # PATCH merges headers by name (RFC 7396): null out the current ones so the flags
        # replace the set, as they always have.
        dropped = {name: None for name in (current["target"]["headers"] if current else {})}
        target["headers"] = {**dropped, **dict(args.header)}
    if getattr(args, "no_headers", False):
        target["headers"] = None if current else {}
    if getattr(args, "no_body", False):
        target["body"] = None
    if target != before:
        body["target"] = target
    retry = dict(current["retry"]) if current else {}
    given = {"max_attempts": args.max_attempts,
             "initial_backoff_seconds": args.initial_backoff_seconds,
             "max_backoff_seconds": args.max_backoff_seconds}
    changed = {k: v for k, v in given.items() if v is not None}
    if changed:
        body["retry"] = {**retry, **changed}
    return body


def _fields(args: argparse.Namespace, *, creating: bool) -> dict[str, Any]:
    """Every field the flags give but `target` and `retry`."""
    given = {"name": args.name, "cron": args.cron, "timezone": args.timezone,
             "misfire_policy": args.misfire_policy,
             "catchup_window_seconds": args.catchup_window_seconds,
             "starts_at": args.starts_at, "ends_at": args.ends_at}
    return {**{k: v for k, v in given.items() if v is not None}, **alert_rules_body(args),
            **semantics_fields(args, creating=creating), **flow_fields(args, creating=creating)}


def schedules_create(client: ApiClient, args: argparse.Namespace) -> None:
    body = {**_fields(args, creating=True), **_target_and_retry(args, None), "paused": args.paused,
            **calendar_fields(client, args, creating=True)}
    created = client.call("POST", "/v1/schedules", body=body)
    show(args, created, render_fields)
    if not wants_json(args.json):
        print("(the signing secret is shown only now; `schedules rotate-secret` makes a new "
              "one)", file=sys.stderr)


# Flags (argparse dests) that change `target` or `retry`, objects the API replaces whole.
TARGET_AND_RETRY_FLAGS = frozenset({
    "url", "method", "body", "header", "no_headers", "no_body", "max_attempts",
    "initial_backoff_seconds", "max_backoff_seconds", *TLS_FLAGS,
})


def schedules_update(client: ApiClient, args: argparse.Namespace) -> None:
    changes = {**_fields(args, creating=False), **calendar_fields(client, args, creating=False)}
    given = {name for name, value in vars(args).items() if value not in (None, False)}
    version = args.if_match
    if given & TARGET_AND_RETRY_FLAGS:
        current = client.call("GET", f"/v1/schedules/{args.id}")
        changes.update(_target_and_retry(args, current))
        # What is sent merges what was read: refuse (412) a change made in between.
        version = current.get("version") if version is None else version
    if not changes:
        raise ConfigError("schedules update: nothing to change; give at least one flag "
                          "(see `cronwire schedules update --help`)")
    show(args, client.call("PATCH", f"/v1/schedules/{args.id}", body=changes,
                           headers=if_match(version)), render_fields)


def schedules_list(client: ApiClient, args: argparse.Namespace) -> None:
    params = {"limit": args.limit, "cursor": args.cursor}
    show_page(args, pages(client, "/v1/schedules", params, args.all), SCHEDULE_COLUMNS)


def _on_schedule(method: str, action: str = "") -> Handler:
    def handler(client: ApiClient, args: argparse.Namespace) -> None:
        path = f"/v1/schedules/{args.id}" + (f"/{action}" if action else "")
        show(args, client.call(method, path), render_fields)

    return handler


def schedules_delete(client: ApiClient, args: argparse.Namespace) -> None:
    client.call("DELETE", f"/v1/schedules/{args.id}")
    show(args, {"id": args.id, "deleted": True}, lambda _: f"deleted schedule {args.id}")


def schedules_preview(client: ApiClient, args: argparse.Namespace) -> None:
    preview = client.call("GET", f"/v1/schedules/{args.id}/preview",
                          params={"count": args.count})
    show(args, preview, lambda p: render_table(p["items"], PREVIEW_COLUMNS))


# ---- parsers -------------------------------------------------------------------------

def add_client_commands(commands: argparse._SubParsersAction[Any]) -> None:
    """`schedules ...` and `runs ...` as top-level commands of `cronwire`."""
    api = connection_options(url_is_api=True)
    api_only = connection_options(url_is_api=False)
    group_help = GROUP_HELP

    schedules = commands.add_parser("schedules", help="tenants: manage schedules over the API",
                                    description="Manage schedules over the API. " + group_help)
    actions = schedules.add_subparsers(dest="schedules_command", required=True,
                                       parser_class=type(schedules), metavar="ACTION")

    def action(name: str, help_text: str, handler: Handler, *,
               parents: argparse.ArgumentParser = api, **extra: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".",
            parents=[parents], **extra)
        parser.set_defaults(handler=client_command(handler))
        return parser

    create = action("create", "create a schedule; prints it with its signing secret (once)",
                    schedules_create, parents=api_only, epilog=CREATE_EXAMPLES,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    schedule_flags(create, creating=True)

    listing = action("list", "list schedules, in pages ordered by id", schedules_list)
    listing.add_argument("--limit", type=int, default=50, metavar="N",
                         help="schedules per page, 1..200 (default: 50)")
    listing.add_argument("--cursor", metavar="CURSOR",
                         help="start after this page (next_cursor of the previous one)")
    listing.add_argument("--all", action="store_true", help="follow every page to the end")
    id_argument(action("get", "show one schedule", _on_schedule("GET")), "schedule")
    update = action("update", "change a schedule's fields; the others stay as they are",
                    schedules_update, parents=api_only)
    id_argument(update, "schedule")
    schedule_flags(update, creating=False)
    add_revision_actions(action, update)

    add_schedule_actions(action)
    id_argument(action("rotate-secret", "new signing secret; the old one also signs for 24 hours",
                       _on_schedule("POST", "rotate-secret")), "schedule")
    id_argument(action("trigger", "run a schedule now (a manual run); prints the run",
                        _on_schedule("POST", "trigger")), "schedule")
    id_argument(action("delete", "delete a schedule; runs not yet started are cancelled",
                        schedules_delete), "schedule")
    preview = action("preview", "the next fire times, in UTC and the schedule's zone",
                     schedules_preview)
    id_argument(preview, "schedule")
    preview.add_argument("--count", type=int, default=10, metavar="N",
                         help="how many fire times, 1..1000 (default: 10)")
    add_schedule_insight(action)
    add_key_actions(action)
    add_as_code_commands(commands, api)
    add_run_commands(commands, api, group_help)
    add_alert_commands(commands, group_help)
