"""Ctrl-C (SIGINT) for the CLI: the handlers, and whether it has arrived (cli/__init__.py
installs the first while the CLI imports; main() the second before a command runs)."""

from __future__ import annotations

import os

_interrupted = False


def interrupted_while_starting(_signum: int, _frame: object) -> None:
    """The handler while the CLI imports: exit 130 at once. Nothing has started, so there
    is nothing to clean up or flush, and an exception would not do: Python runs the
    handler wherever the main thread is, and where that is a finalizer (the import
    system's module-lock callbacks, a garbage collection) the SystemExit is printed as
    "Exception ignored" with a traceback and dropped (CI saw one)."""
    os._exit(130)


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
