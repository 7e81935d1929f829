"""The `cronwire` command: the parser and the entry point. Bad arguments or
configuration: one stderr line, exit 2.

The commands live beside it: operator.py (on the database), schedules.py and runs.py
(tenants, over the API), harness_flags.py (`loadtest`, `chaos`), simulation.py (`sim`)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from cronwire.cli.access import add_access_commands
from cronwire.cli.api_client import GROUP_HELP
from cronwire.cli.calendars import add_calendar_commands
from cronwire.cli.flow_control import add_flow_control_command
from cronwire.cli.harness_flags import add_harness_commands
from cronwire.cli.interrupts import interrupt, interrupted
from cronwire.cli.keys import add_key_commands
from cronwire.cli.operator import add_operator_commands
from cronwire.cli.schedules import add_client_commands
from cronwire.cli.simulation import add_sim_command
from cronwire.config import Settings, describe, load_settings
from cronwire.domain.errors import ConfigError, CronwireError
from cronwire.version import version

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (the default prints usage too). Every
    sub-command's parser is one of these: argparse makes a parser's sub-commands of its
    own class."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _fail(message: str) -> NoReturn:
    print(f"cronwire: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _setup_logging(settings: Settings) -> None:
    from cronwire.logs import configure_logging

    configure_logging(settings, sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    variables = "\n".join(f"  {name:<40} default {default}" for name, default in describe())
    parser = _Parser(
        prog="cronwire",
        description="Multi-tenant durable cron service.",
        epilog="configuration (environment, or a TOML file via SCHEDULER_CONFIG_FILE):\n"
        + variables,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cronwire {version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_operator_commands(commands)
    add_key_commands(commands)
    add_client_commands(commands)
    add_flow_control_command(commands)
    add_access_commands(commands, GROUP_HELP)
    add_calendar_commands(commands, GROUP_HELP)
    add_harness_commands(commands)
    add_sim_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        _fail(str(exc))
    _setup_logging(settings)
    # From here Ctrl-C is a KeyboardInterrupt again (cli/__init__.py made it a quiet exit
    # while importing): `finally` blocks stop what a command started, asyncio cancels its
    # tasks, and the interrupt ends below as exit 130 without a traceback.
    with contextlib.suppress(ValueError):  # ValueError: not the main thread (a test's)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, interrupt)
    if interrupted():  # a SIGINT whose exception a finalizer dropped while we imported
        return EXIT_INTERRUPTED
    try:
        result: int = args.handler(settings, args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except ConfigError as exc:
        _fail(str(exc))
    except CronwireError as exc:
        print(f"cronwire: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # e.g. the database refuses connections: one line, no traceback
        print(f"cronwire: {exc}", file=sys.stderr)
        return 1
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
