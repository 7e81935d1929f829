"""The `cronwire` command: the parser and entry point (main.py); the operator commands
on the database (operator.py, with database.py's rules for which database); the tenant
commands over the API (schedules.py, runs.py, api_client.py, output.py); the harnesses'
flags (harness_flags.py)."""

from __future__ import annotations

import signal

from cronwire.cli.interrupts import interrupted_while_starting


def run() -> int:
    """The console script. Ctrl-C while Python imports the CLI (the first few tenths of a
    second of every command) is a quiet exit 130, not a KeyboardInterrupt traceback out of
    some import: nothing has started yet, so nothing needs cleaning up. main() puts the
    default handler back before the command runs and turns a KeyboardInterrupt there into
    exit 130 too. A SIGINT ignored by whoever started us (``nohup``, a shell's ``&``)
    stays ignored."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, interrupted_while_starting)
    from cronwire.cli.main import main

    return main()
