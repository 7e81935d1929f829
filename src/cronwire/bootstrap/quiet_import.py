"""Import a library while some optional packages look absent to it (container.py says why)."""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType


class _Hidden(importlib.abc.MetaPathFinder):
    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> None:
        if fullname.partition(".")[0] in self.names:
            # What a missing package raises: the library's own `except ImportError` then
            # skips that integration. (A None in sys.modules would not do: Cython-compiled
            # modules, as dependency-injector's are, take it for the module itself.)
            raise ModuleNotFoundError(f"{fullname} is hidden while importing", name=fullname)
        return None


@contextlib.contextmanager
def hiding(*names: str) -> Iterator[None]:
    """Inside the block, importing any of ``names`` (or their submodules) that is not
    imported yet fails as if it were not installed. Ones already imported stay visible."""
    finder = _Hidden(frozenset(names))
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
