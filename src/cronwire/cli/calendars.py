"""`cronwire calendars create|list|get|update|delete` over the API (ADR 0064), and the
`schedules create|update` flags that exclude calendars (`--exclude-calendar`,
`--calendar-policy`, `--no-calendars`). Like the other tenant commands they build requests
from flags named after the API's fields and print what it answers."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Mapping
from typing import Any

from cronwire.cli.api_client import (
    ApiClient,
    Handler,
    client_command,
    connection_options,
    id_argument,
)
from cronwire.cli.output import Column, field, render_fields, show, show_page
from cronwire.domain.calendar_specs import MAX_CALENDARS_PER_SCHEDULE, MAX_HOLIDAY_YEARS
from cronwire.domain.calendars import CALENDAR_POLICIES, MAX_SHIFT_DAYS
from cronwire.domain.errors import ConfigError


def _count(row: Mapping[str, Any]) -> str:
    return str(len(row.get("dates") or []))


def _source(row: Mapping[str, Any]) -> str:
    source = row.get("holidays")
    if not source:
        return "dates"
    where = source["country"] + (f"-{source['subdivision']}" if source["subdivision"] else "")
    return f"holidays {where} {','.join(str(y) for y in source['years'])}"


CALENDAR_COLUMNS = [Column("ID", field("id")), Column("NAME", field("name")),
                    Column("DATES", _count), Column("FROM", _source)]


# ---- the schedule flags --------------------------------------------------------------


def add_calendar_flags(parser: argparse.ArgumentParser, *, creating: bool) -> None:
    keep = "" if creating else " (default: unchanged)"
    parser.add_argument("--exclude-calendar", action="append", metavar="ID_OR_NAME",
                        help="leave out the dates of this calendar of yours, repeatable (at "
                        f"most {MAX_CALENDARS_PER_SCHEDULE}); on update the flags replace the "
                        "set" + keep)
    parser.add_argument("--calendar-policy", choices=CALENDAR_POLICIES,
                        help="an occurrence on an excluded date: skip it (a skipped run), or "
                        "move it to the same local time on the next or previous business day "
                        f"(not excluded, not a weekend; at most {MAX_SHIFT_DAYS} days away)"
                        + (" (default: skip)" if creating else keep))
    if not creating:
        parser.add_argument("--no-calendars", action="store_true",
                            help="exclude no calendar any more")


def _calendar_ids(client: ApiClient, given: list[str]) -> list[str]:
    """Ids as given; a name is looked up among the tenant's calendars."""
    names = [g for g in given if not _is_id(g)]
    known: dict[str, str] = {}
    if names:
        known = {c["name"]: c["id"] for c in client.call("GET", "/v1/calendars")["items"]}
    missing = [n for n in names if n not in known]
    if missing:
        raise ConfigError(f"--exclude-calendar: no calendar named {missing[0]!r} (see "
                          "`cronwire calendars list`)")
    return [g if _is_id(g) else known[g] for g in given]


def _is_id(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def calendar_fields(client: ApiClient, args: argparse.Namespace, *,
                    creating: bool) -> dict[str, Any]:
    """``exclude_calendars`` and ``calendar_policy`` as the flags give them."""
    body: dict[str, Any] = {}
    if not creating and args.no_calendars:
        if args.exclude_calendar:
            raise ConfigError("--no-calendars: not with --exclude-calendar")
        body["exclude_calendars"] = []
    if args.exclude_calendar:
        body["exclude_calendars"] = _calendar_ids(client, args.exclude_calendar)
    if args.calendar_policy is not None:
        body["calendar_policy"] = args.calendar_policy
    return body


# ---- calendars -----------------------------------------------------------------------


def _dates_or_holidays(args: argparse.Namespace, *, creating: bool) -> dict[str, Any]:
    holidays = args.country is not None or args.subdivision is not None or args.year
    if args.date and holidays:
        raise ConfigError("--date: not with --country, --subdivision or --year")
    if holidays:
        if args.country is None or not args.year:
            raise ConfigError("--country and --year go together (the holidays of a "
                              "country in some years)")
        return {"holidays": {"country": args.country, "subdivision": args.subdivision,
                             "years": args.year}}
    if args.date or (creating and not args.no_dates):
        return {"dates": args.date or []}
    return {"dates": []} if getattr(args, "no_dates", False) else {}


def calendars_create(client: ApiClient, args: argparse.Namespace) -> None:
    body = {"name": args.name, **_dates_or_holidays(args, creating=True)}
    show(args, client.call("POST", "/v1/calendars", body=body), render_fields)


def calendars_update(client: ApiClient, args: argparse.Namespace) -> None:
    body = {**({"name": args.name} if args.name else {}),
            **_dates_or_holidays(args, creating=False)}
    if not body:
        raise ConfigError("calendars update: nothing to change; give --name, --date, "
                          "--no-dates or --country with --year")
    show(args, client.call("PATCH", f"/v1/calendars/{args.id}", body=body), render_fields)


def calendars_list(client: ApiClient, args: argparse.Namespace) -> None:
    show_page(args, client.call("GET", "/v1/calendars"), CALENDAR_COLUMNS)


def calendars_get(client: ApiClient, args: argparse.Namespace) -> None:
    show(args, client.call("GET", f"/v1/calendars/{args.id}"), render_fields)


def calendars_delete(client: ApiClient, args: argparse.Namespace) -> None:
    client.call("DELETE", f"/v1/calendars/{args.id}")
    show(args, {"id": args.id, "deleted": True}, lambda _: f"deleted calendar {args.id}")


def _content_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--date", action="append", metavar="YYYY-MM-DD",
                        help="an excluded date, repeatable")
    parser.add_argument("--no-dates", action="store_true", help="no dates (an empty calendar)")
    parser.add_argument("--country", metavar="CODE",
                        help="the public holidays of this country (ISO 3166-1, e.g. DE), "
                        "from the holidays package; with --year")
    parser.add_argument("--subdivision", metavar="CODE",
                        help="of this subdivision of the country (e.g. BY)")
    parser.add_argument("--year", action="append", type=int, metavar="YEAR",
                        help=f"a year of holidays, repeatable (at most {MAX_HOLIDAY_YEARS})")


def add_calendar_commands(commands: argparse._SubParsersAction[Any], group_help: str) -> None:
    """`calendars create|list|get|update|delete` as a top-level command of `cronwire`."""
    api = connection_options(url_is_api=True)
    text = "tenants: holiday and business-day calendars that schedules exclude"
    group = commands.add_parser("calendars", help=text, description=text[9].upper() + text[10:]
                                + " over the API. " + group_help)
    actions = group.add_subparsers(dest="calendars_command", required=True,
                                   parser_class=type(group), metavar="ACTION")

    def action(name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(
            name, parents=[api], help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".")
        parser.set_defaults(handler=client_command(handler))
        return parser

    create = action("create", "a calendar of dates, or of a country's public holidays",
                    calendars_create)
    create.add_argument("--name", required=True, help="unique among your calendars")
    _content_flags(create)
    action("list", "your calendars, by name", calendars_list)
    id_argument(action("get", "a calendar and its dates", calendars_get), "calendar")
    update = action("update", "rename it or give it new dates; the schedules that exclude "
                    "it are planned again", calendars_update)
    id_argument(update, "calendar")
    update.add_argument("--name", help="a new name")
    _content_flags(update)
    id_argument(action("delete", "delete a calendar no schedule excludes", calendars_delete),
                "calendar")
