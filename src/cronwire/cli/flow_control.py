"""Tenant flags for flow control (ADR 0040): `schedules create|update --flow-key
--max-concurrency --rate-per-second --burst`, and `cronwire flow-control`, the keys as they
stand.

The flags build the schedule's `flow_control` object; on update only the members given
change (the API merges them), and `--no-flow-control` removes it."""

from __future__ import annotations

import argparse
from typing import Any

from cronwire.cli.api_client import GROUP_HELP, ApiClient, client_command, connection_options
from cronwire.cli.output import Column, field, show_page
from cronwire.domain.errors import ConfigError
from cronwire.domain.flow_control import MAX_BURST, MAX_CONCURRENCY, MAX_RATE_PER_SECOND


def add_flow_flags(parser: argparse.ArgumentParser, *, creating: bool) -> None:
    keep = "" if creating else " (default: unchanged)"
    parser.add_argument("--flow-key", metavar="KEY",
                        help="schedules with the same key share its limits (default: the "
                        "target's origin)" + keep)
    parser.add_argument("--max-concurrency", type=int, metavar="N",
                        help=f"at most N requests of the key in flight (1..{MAX_CONCURRENCY:,})"
                        + keep)
    parser.add_argument("--rate-per-second", type=float, metavar="R",
                        help=f"at most R requests of the key started per second "
                        f"(up to {MAX_RATE_PER_SECOND:,.0f})" + keep)
    parser.add_argument("--burst", type=int, metavar="N",
                        help=f"tokens the rate's bucket holds, the requests that may start "
                        f"at once (1..{MAX_BURST:,}; needs a rate; default: one second's "
                        f"worth)" + keep)
    if not creating:
        parser.add_argument("--no-flow-control", action="store_true",
                            help="remove the schedule's flow control")


def flow_fields(args: argparse.Namespace, *, creating: bool) -> dict[str, Any]:
    """``{"flow_control": {...}}`` with the members the flags give, or nothing."""
    given = {"key": args.flow_key, "max_concurrency": args.max_concurrency,
             "rate_per_second": args.rate_per_second, "burst": args.burst}
    members = {name: value for name, value in given.items() if value is not None}
    if not creating and args.no_flow_control:
        if members:
            raise ConfigError("--no-flow-control: not with --flow-key, --max-concurrency, "
                              "--rate-per-second or --burst")
        return {"flow_control": None}
    return {"flow_control": members} if members else {}



KEY_COLUMNS = [
    Column("KEY", field("key")), Column("MAX CONCURRENCY", field("max_concurrency")),
    Column("RATE/S", field("rate_per_second")), Column("IN FLIGHT", field("in_flight")),
    Column("WAITING", field("waiting")), Column("HELD UNTIL (UTC)", field("held_until")),
]


def flow_control_list(client: ApiClient, args: argparse.Namespace) -> None:
    page = client.call("GET", "/v1/flow-control", params={"limit": args.limit, "key": args.key})
    show_page(args, page, KEY_COLUMNS)


def add_flow_control_command(commands: argparse._SubParsersAction[Any]) -> None:
    """`cronwire flow-control`: GET /v1/flow-control, the tenant's keys as they stand."""
    text = ("The tenant's flow-control keys as they stand: limits, requests in flight, runs "
            "waiting for a slot, and a Retry-After hold")
    parser = commands.add_parser("flow-control", parents=[connection_options(url_is_api=True)],
                                 help="tenants: flow-control keys, in flight and waiting",
                                 description=f"{text}. {GROUP_HELP}")
    parser.set_defaults(handler=client_command(flow_control_list))
    parser.add_argument("--key", metavar="KEY", help="only this key (default: every key)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="at most N keys (default: the API's maximum)")
