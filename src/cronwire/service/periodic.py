"""The one periodic runner every background loop of a replica uses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from cronwire.domain.errors import StorageError

log = logging.getLogger(__name__)


async def every(
    seconds: float,
    stopping: asyncio.Event | None,
    step: Callable[[], Awaitable[object]],
    what: str,
    *,
    first_delay: float = 0.0,
    backoff: Callable[[int], float] | None = None,
) -> None:
    """Run ``step`` after ``first_delay`` and then every ``seconds`` until ``stopping`` is
    set, or (``stopping`` None) until the task is cancelled. A storage failure does not
    end the loop: it is logged (with its traceback the first time in a row) and the step
    runs again after ``backoff(failures in a row)`` seconds, or after the usual interval
    without a backoff."""
    delay, failures = first_delay, 0
    while stopping is None or not stopping.is_set():
        if delay > 0 and not await _paused(stopping, delay):
            return
        try:
            await step()
        except StorageError:
            failures += 1
            delay = seconds if backoff is None else backoff(failures)
            log.warning("%s failed (%d in a row); retrying in %.2fs", what, failures, delay,
                        exc_info=failures == 1)
        else:
            delay, failures = seconds, 0


async def _paused(stopping: asyncio.Event | None, seconds: float) -> bool:
    """Wait ``seconds``; False if ``stopping`` was set meanwhile. Without an event it is a
    plain sleep (Python 3.11's wait_for can swallow a cancel arriving as it times out)."""
    if stopping is None:
        await asyncio.sleep(seconds)
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), timeout=seconds)
    return not stopping.is_set()
