"""The one way tests wait for something with no event to await: poll a condition with a
deadline (never a bare sleep)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

Condition = Callable[[], object] | Callable[[], Awaitable[object]]


async def wait_until(condition: Condition, within: float = 10.0, every: float = 0.05) -> None:
    """Return once ``condition()`` (sync or async) is truthy; TimeoutError after ``within``
    seconds."""
    async with asyncio.timeout(within):
        while True:
            value = condition()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return
            await asyncio.sleep(every)


def wait_until_sync(condition: Callable[[], object], within: float = 10.0,
                    every: float = 0.05) -> None:
    """The same for code outside an event loop (processes, files)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {within}s")
        time.sleep(every)
