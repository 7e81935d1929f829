"""CpuWork on one worker thread of its own (ADR 0055).

Why a thread, and only one: the work is pure Python, so the GIL lets one thread run it at
a time whatever the pool size; a second worker would add no throughput, only a second
contender for the GIL against the event loop's thread. While the worker computes, the loop
still gets the GIL back within the interpreter's switch interval (5 ms) whenever it has
something to run, so no callback of the loop waits behind a walk. Why not the loop's
default executor: DNS look-ups and file I/O run there, and must not queue behind walks.
Why not processes: every result (up to 10,001 instants) would be unpickled on the loop,
and a replica is sized for its deliveries, not for a pool of interpreters.

Requests queue in order behind the one worker (the executor's queue), so 64 concurrent
backfills wait their turn instead of piling onto the loop; a request cancelled while it
waits (the client went away) drops its work before it starts.
"""

from __future__ import annotations

import asyncio
from asyncio import CancelledError
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from cronwire.domain.errors import StorageError

T = TypeVar("T")


class CpuLane:
    def __init__(self, workers: int = 1) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers,
                                            thread_name_prefix="cronwire-cpu")
        self._closed = False

    async def run(self, work: Callable[[], T]) -> T:
        """StorageError (a 503 with Retry-After) once the lane is closed: a request still in
        flight when the replica shuts down is told to try another replica."""
        if self._closed:
            raise StorageError("the replica is shutting down (its CPU lane is closed)")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, work)
        except CancelledError:
            if self._closed and not _current_task_cancelling():
                raise StorageError("the replica is shutting down (its CPU lane is "
                                   "closed)") from None
            raise

    def close(self) -> None:
        """Drop queued work (its callers get a StorageError); a walk in progress finishes
        on its own (it cannot be stopped part-way) and nobody waits for it."""
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)


def _current_task_cancelling() -> bool:
    """Whether the caller itself is being cancelled (not only its queued work dropped)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
