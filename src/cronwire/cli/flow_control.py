"""Tenant flags for flow control (ADR 0040): `schedules create|update --flow-key
--max-concurrency --rate-per-second`.

The flags build the schedule's `flow_control` object; on update only the members given
change (the API merges them), and `--no-flow-control` removes it."""

from __future__ import annotations

import argparse
from typing import Any

from cronwire.domain.errors import ConfigError
from cronwire.domain.flow_control import MAX_CONCURRENCY, MAX_RATE_PER_SECOND


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
    if not creating:
        parser.add_argument("--no-flow-control", action="store_true",
                            help="remove the schedule's flow control")


def flow_fields(args: argparse.Namespace, *, creating: bool) -> dict[str, Any]:
    """``{"flow_control": {...}}`` with the members the flags give, or nothing."""
    given = {"key": args.flow_key, "max_concurrency": args.max_concurrency,
             "rate_per_second": args.rate_per_second}
    members = {name: value for name, value in given.items() if value is not None}
    if not creating and args.no_flow_control:
        if members:
            raise ConfigError("--no-flow-control: not with --flow-key, --max-concurrency or "
                              "--rate-per-second")
        return {"flow_control": None}
    return {"flow_control": members} if members else {}

