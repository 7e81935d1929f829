"""ClaimWake: the executor's claim loop's waits, and what ends them early.

The loop waits for idle slots, for its next claim, or for work. A freed slot (a delivery
ended) or a stop ends any wait at once; while the loop waits for work, the claim source
may end it too (kafka mode: a hint arrived), so a batch never waits a poll interval.
"""

from __future__ import annotations

import asyncio
import contextlib

from cronwire.ports import ClaimSource


class ClaimWake:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._stopping: asyncio.Event | None = None  # the claim loop's halt, once it runs

    def set(self) -> None:
        """A slot was freed or a stop was asked: end the current wait."""
        self._event.set()

    def watch(self, stopping: asyncio.Event) -> None:
        self._stopping = stopping

    async def set_when(self, stopping: asyncio.Event, halt: asyncio.Event | None = None) -> None:
        await stopping.wait()
        if halt is not None:
            halt.set()
        self._event.set()

    async def pause(self, seconds: float) -> None:
        """Wait up to ``seconds``; a freed slot or ``stopping`` ends the wait early."""
        self._event.clear()
        if self._stop_requested():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), seconds)

    async def wait_for_work(self, seconds: float, claims: ClaimSource) -> None:
        """Like ``pause``, and ``claims`` may end the wait early when it has work."""
        self._event.clear()
        if self._stop_requested():
            return
        woken = asyncio.ensure_future(self._event.wait())
        work = asyncio.ensure_future(claims.wait_for_work(seconds))
        try:
            await asyncio.wait({woken, work}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            work.cancel()

    def _stop_requested(self) -> bool:
        """Checked after clearing the event: a stop that was signalled while the claim
        loop was busy elsewhere (a claim or next-due query in flight) set the event before
        it was cleared, and would otherwise be slept through for a whole poll interval."""
        return self._stopping is not None and self._stopping.is_set()
