"""`cronwire keys status|rotate`: the key ring's upkeep, straight on the database
(sealed secrets, ADR 0061; docs/operating.md "Secrets and keys")."""

from __future__ import annotations

import argparse
from typing import Any

from cronwire.cli.database import existing_database, run_async
from cronwire.cli.output import print_json
from cronwire.config import Settings


def _key_upkeep(settings: Settings, *, rotate: bool) -> int:
    from cronwire.bootstrap.factories import key_upkeep
    from cronwire.bootstrap.secret_keys import with_key_ring

    with existing_database(with_key_ring(settings)) as ready:
        report = run_async(lambda: key_upkeep(ready, rotate=rotate))
    print_json(report)
    return 0


def cmd_keys_status(settings: Settings, _args: argparse.Namespace) -> int:
    return _key_upkeep(settings, rotate=False)


def cmd_keys_rotate(settings: Settings, _args: argparse.Namespace) -> int:
    return _key_upkeep(settings, rotate=True)


def add_key_commands(commands: argparse._SubParsersAction[Any]) -> None:
    keys = commands.add_parser("keys", help="the key ring that seals tenant secrets at rest")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    status = key_commands.add_parser(
        "status", help="how many tenant data keys each key id of the ring wraps (JSON)")
    status.set_defaults(handler=cmd_keys_status)
    rotate = key_commands.add_parser(
        "rotate", help="re-wrap every data key under the first key of SCHEDULER_SECRET_KEYS",
        description="Online, batched, idempotent and resumable: replicas keep delivering, "
        "and an interrupted run is finished by running it again. Afterwards `keys status` "
        "shows only the first key id, and the others can leave the configuration.")
    rotate.set_defaults(handler=cmd_keys_rotate)
