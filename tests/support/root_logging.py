"""The root logger as each test found it.

A test that runs the CLI's ``main`` in this process (``tests/support/cli_shell.py``, the
simulation and tenant CLI tests) has ``configure_logging`` put our handler on the root
logger, writing to that test's captured stderr. Left there, it outlives the capture: the
next record any later test or library logs at warning or above is written to a closed
stream, and ``logging`` prints "--- Logging error ---" with a stack on the real stderr
(two full runs on 2026-12-07 printed four each, for an aiokafka future the garbage
collector freed). The fixture takes off whatever handler a test added, except pytest's
own, and puts the root's level back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


def _pytests(handler: logging.Handler) -> bool:
    """pytest adds and removes its capture handlers around each phase by itself."""
    return type(handler).__module__.startswith("_pytest")


@pytest.fixture(autouse=True)
def root_logging_as_found() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers and not _pytests(handler):
            root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers and not _pytests(handler):
            root.addHandler(handler)
    root.setLevel(level)
