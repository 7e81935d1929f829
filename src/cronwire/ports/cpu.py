"""Where the API's CPU-heavy pure work runs (ADR 0055): backfill and explain walks, long
previews, the stats' histograms. A replica shares one event loop between its API and its
claims and lease renewals, so such work must not run on it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class CpuWork(Protocol):
    async def run(self, work: Callable[[], T]) -> T:
        """``work()`` computed away from the event loop, after the work handed over before
        it (a bounded lane: many requests queue, they do not pile up). ``work`` is pure: it
        touches no connection and no state another call may change unguarded. Raises what
        ``work`` raises; cancelling the caller drops work not yet started."""
        ...


class OnTheLoop:
    """CpuWork on the caller's own event loop: for tests, one-shot tools and the fakes.
    A serving replica passes its lane (bootstrap wires adapters/cpu_lane.CpuLane)."""

    async def run(self, work: Callable[[], T]) -> T:
        return work()
