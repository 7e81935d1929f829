"""The lean deliverer's bound on requests in flight: a counting semaphore that can also
be taken without awaiting, so a delivery's fast path (``LeanDeliverer.begin``, docs/benchmarks.md#levers)
takes its slot in the same step that writes its request (``asyncio.Semaphore`` has no
such call); and ``within``, a rarer wait bounded by the attempt's deadline."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class Slots:
    """``total`` slots; :meth:`try_take` never waits, :meth:`take` waits its turn (first
    come, first served: a waiter is never overtaken by a :meth:`try_take`)."""

    __slots__ = ("_free", "_waiters")

    def __init__(self, total: int) -> None:
        self._free = total
        self._waiters: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        return self._free <= 0 or bool(self._waiters)

    def try_take(self) -> bool:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def take(self) -> None:
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot just as the wait was cancelled: pass it on
            raise

    def give(self) -> None:
        """Hand the slot to the longest waiter still waiting, else free it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


async def within(awaitable: Awaitable[T], deadline: float) -> T:
    """``awaitable`` bounded by ``deadline`` (the loop's clock): the rarer waits of an
    attempt (a pool slot, a new connection) pay for asyncio.wait_for."""
    remaining = deadline - asyncio.get_running_loop().time()
    return await asyncio.wait_for(awaitable, max(0.0, remaining))

