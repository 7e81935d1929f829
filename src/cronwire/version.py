"""The installed version of cronwire, for `cronwire --version` and the User-Agent the CLI
and the deliverers send."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _installed


def version() -> str:
    try:
        return _installed("cronwire")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


@functools.cache
def user_agent() -> str:
    """``cronwire/<installed version>``."""
    return f"cronwire/{version()}"
