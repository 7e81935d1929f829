"""Typed test signals: what a service did, recorded so tests await it instead of sleeping.

Production passes none and gets :func:`quiet_signals`, a null object whose records drop
everything, so services record unconditionally; tests pass an :class:`ExecutorSignals`
and wait on a condition with a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar
from uuid import UUID

from cronwire.domain.model import RunStatus

T = TypeVar("T")


class Observed(Generic[T]):
    """An append-only record that can be awaited."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self._changed = asyncio.Event()

    def add(self, items: Iterable[T]) -> None:
        self.items.extend(items)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[list[T]], bool], within: float) -> None:
        """Return once ``predicate(items)`` holds; after ``within`` seconds a TimeoutError
        saying how many items had been recorded."""
        try:
            async with asyncio.timeout(within):
                while not predicate(self.items):
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise TimeoutError(f"signal: condition not met within {within:g}s; "
                               f"{len(self.items)} recorded: {self.items[-5:]!r} last") from None

    async def wait_count(self, count: int, within: float) -> None:
        await self.wait_for(lambda items: len(items) >= count, within)


class Ignored(Observed[T]):
    """The null record: keeps nothing, so production pays one no-op call per signal."""

    def __init__(self) -> None:
        self.items = []

    def add(self, items: Iterable[T]) -> None:
        return None


@dataclass
class ExecutorSignals:
    claimed: Observed[UUID] = field(default_factory=Observed)
    started: Observed[UUID] = field(default_factory=Observed)  # request about to leave
    settled: Observed[tuple[UUID, RunStatus]] = field(default_factory=Observed)  # write landed
    lost: Observed[UUID] = field(default_factory=Observed)  # abandoned or write refused
    abandoned: Observed[UUID] = field(default_factory=Observed)  # request cancelled, lease lost
    deferred: Observed[UUID] = field(default_factory=Observed)
    released: Observed[UUID] = field(default_factory=Observed)
    renewals: Observed[int] = field(default_factory=Observed)  # leases renewed per round


def quiet_signals() -> ExecutorSignals:
    """Signals that record nothing (production)."""
    return ExecutorSignals(
        claimed=Ignored(), started=Ignored(), settled=Ignored(), lost=Ignored(),
        abandoned=Ignored(), deferred=Ignored(), released=Ignored(), renewals=Ignored(),
    )
