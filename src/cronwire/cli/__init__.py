"""The `cronwire` command: the parser and entry point (main.py); the operator commands
on the database (operator.py, with database.py's rules for which database); the tenant
commands over the API (schedules.py, runs.py, api_client.py, output.py); the harnesses'
flags (harness_flags.py)."""

from __future__ import annotations

import signal

_interrupted = False


def _interrupted_while_starting(_signum: int, _frame: object) -> None:
    global _interrupted
    _interrupted = True
    raise SystemExit(130)


def interrupt(_signum: int, _frame: object) -> None:
    """main()'s SIGINT handler: a KeyboardInterrupt, as Python's own, and remembered.
    Python runs a signal handler wherever the main thread is, a finalizer (``__del__``,
    a garbage collection an import set off) included, and an exception raised there is
    printed as "Exception ignored" and dropped: the command went on to wait out its
    whole timeout on a silent API. So the commands also ask ``interrupted()`` before they
    wait on anything."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def interrupted() -> bool:
    """Whether Ctrl-C (SIGINT) has arrived, even if the exception it raised was dropped."""
    return _interrupted


def run() -> int:
    """The console script. Ctrl-C while Python imports the CLI (the first few tenths of a
    second of every command) is a quiet exit 130, not a KeyboardInterrupt traceback out of
    some import: nothing has started yet, so nothing needs cleaning up. main() puts the
    default handler back before the command runs and turns a KeyboardInterrupt there into
    exit 130 too. A SIGINT ignored by whoever started us (``nohup``, a shell's ``&``)
    stays ignored."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    from cronwire.cli.main import main

    return main()
