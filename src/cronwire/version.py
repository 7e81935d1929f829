"""The installed version of cronwire, for `cronwire --version` and the CLI's User-Agent."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _installed


def version() -> str:
    try:
        return _installed("cronwire")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"
