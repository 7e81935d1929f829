"""Tenant observability commands over the API: `schedules explain|stats` and
`alerts set|get|events`. Like cli_client, they only build requests from flags named after
the API's fields and print what it answers."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from cronwire.cli.api_client import (
    ApiClient,
    Handler,
    client_command,
    connection_options,
    id_argument,
)
from cronwire.cli.output import Column, field, readable_ms, render_fields, show, show_page
from cronwire.domain.alerts import EVENT_TYPES
from cronwire.domain.stats import DEFAULT_WINDOW, WINDOWS

Action = Callable[..., argparse.ArgumentParser]
EVENT_COLUMNS = [
    Column("CREATED (UTC)", field("created_at")), Column("TYPE", field("type")),
    Column("SCHEDULE", field("schedule_name")), Column("STATUS", field("status")),
    Column("ATTEMPTS", field("attempt_count")), Column("LAST CODE", field("last_status_code")),
    Column("ID", field("id")),
]


ALERT_RULE_FLAGS = (("alert_after_failures", "after_failures", "N",
                     "schedule.failing after N failed runs in a row"),
                    ("alert_late_after_seconds", "late_after_seconds", "SECONDS",
                     "schedule.late when an occurrence has not started this long after due"),
                    ("alert_max_duration_ms", "max_duration_ms", "MS",
                     "schedule.slow when a success took longer than this"))
REMOVE = "none"


def _rule(text: str) -> int | str:
    if text.strip().lower() == REMOVE:
        return REMOVE
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'none', got {text!r}") \
            from None


def add_alert_rule_flags(parser: argparse.ArgumentParser) -> None:
    """`schedules create|update --alert-...`: the schedule's `alerts` rules."""
    for dest, _field, metavar, text in ALERT_RULE_FLAGS:
        parser.add_argument("--" + dest.replace("_", "-"), dest=dest, type=_rule,
                            metavar=metavar, help=f"alerts: {text} ('none' removes it)")


def alert_rules_body(args: argparse.Namespace) -> dict[str, Any]:
    """``{"alerts": {...}}`` with the rules the flags name (PATCH merges rule by rule)."""
    rules = {name: (None if getattr(args, dest) == REMOVE else getattr(args, dest))
             for dest, name, _m, _t in ALERT_RULE_FLAGS if getattr(args, dest, None) is not None}
    return {"alerts": rules} if rules else {}


def schedules_explain(client: ApiClient, args: argparse.Namespace) -> None:
    body = client.call("GET", f"/v1/schedules/{args.id}/explain", params={"at": args.at})

    def render(value: Mapping[str, Any]) -> str:
        run = value.get("run") or {}
        lines = [f"{value['verdict']}: {value['reason']}",
                 f"occurrence           {value['occurrence']}",
                 f"previous_occurrence  {value['previous_occurrence']}",
                 f"next_occurrence      {value['next_occurrence']}"]
        if run:
            lines.append(f"run                  {run['id']} ({run['status']})")
        return "\n".join(lines)

    show(args, body, render)


def render_stats(stats: Mapping[str, Any]) -> str:
    """The stats as fields, the percentiles of milliseconds in readable units."""
    shown: dict[str, Any] = {}
    for key, value in stats.items():
        if key.endswith("_ms") and isinstance(value, Mapping):
            shown[key.removesuffix("_ms")] = (
                "none" if value.get("p50") is None else
                " · ".join(f"{p} {readable_ms(value[p])}" for p in ("p50", "p95", "p99")))
        else:
            shown[key] = value
    return render_fields(shown)


def schedules_stats(client: ApiClient, args: argparse.Namespace) -> None:
    show(args, client.call("GET", f"/v1/schedules/{args.id}/stats",
                           params={"window": args.window}), render_stats)


def alerts_set(client: ApiClient, args: argparse.Namespace) -> None:
    body = {"url": args.url, "events": args.event}
    show(args, client.call("PUT", "/v1/alerts", body=body), render_fields)


def alerts_get(client: ApiClient, args: argparse.Namespace) -> None:
    show(args, client.call("GET", "/v1/alerts"), render_fields)


def alerts_events(client: ApiClient, args: argparse.Namespace) -> None:
    page = client.call("GET", "/v1/alerts/events",
                       params={"limit": args.limit, "cursor": args.cursor})
    show_page(args, page, EVENT_COLUMNS)


def add_schedule_insight(action: Action) -> None:
    """`schedules explain` and `schedules stats`, through cli_client's ``action``."""
    explain = action("explain", "what happened (or will) to the occurrence at or after an "
                     "instant, and why", schedules_explain)
    id_argument(explain, "schedule")
    explain.add_argument("--at", required=True, metavar="TIME",
                         help="RFC 3339 instant, e.g. 2027-03-28T02:30:00+01:00")
    stats = action("stats", "counts, success rate, fire lag and durations over a window",
                   schedules_stats)
    id_argument(stats, "schedule")
    stats.add_argument("--window", choices=list(WINDOWS), default=DEFAULT_WINDOW,
                       help=f"how far back (default: {DEFAULT_WINDOW})")


def add_alert_commands(commands: argparse._SubParsersAction[Any], group_help: str) -> None:
    """`alerts set|get|events` as a top-level command of `cronwire`."""
    api = connection_options(url_is_api=True)
    api_only = connection_options(url_is_api=False)  # --url is the destination here
    alerts = commands.add_parser("alerts", help="tenants: alert destination and events",
                                 description="The alert destination and the alert events "
                                 "over the API. " + group_help)
    actions = alerts.add_subparsers(dest="alerts_command", required=True,
                                    parser_class=type(alerts), metavar="ACTION")

    def action(name: str, help_text: str, handler: Handler,
               parents: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(
            name, parents=[parents], help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".")
        parser.set_defaults(handler=client_command(handler))
        return parser

    put = action("set", "set where alert events go; prints its signing secret (once)",
                 alerts_set, api_only)
    put.add_argument("--url", required=True, metavar="URL",
                     help="the alert destination (same address policy as targets)")
    put.add_argument("--event", action="append", choices=EVENT_TYPES, metavar="TYPE",
                     help="an event type to deliver, repeatable (default: all of "
                     f"{', '.join(EVENT_TYPES)})")
    action("get", "show the alert destination (not its secret)", alerts_get, api)
    events = action("events", "alert events, newest first, with their delivery status",
                    alerts_events, api)
    events.add_argument("--limit", type=int, default=50, metavar="N",
                        help="events per page, 1..200 (default: 50)")
    events.add_argument("--cursor", metavar="CURSOR",
                        help="continue after this page (next_cursor of the previous one)")
