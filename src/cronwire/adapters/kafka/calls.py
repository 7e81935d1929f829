"""Calls into aiokafka's clients: what they can raise, and a bound on their start/stop.

``ConsumerStoppedError`` is not a ``KafkaError``: ``getmany`` raises it when the consumer
was stopped under it (the link lost the broker meanwhile). ``AssertionError``: aiokafka
asserts on some states a lost connection leaves behind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from aiokafka.errors import ConsumerStoppedError, KafkaError

log = logging.getLogger(__name__)
KAFKA_FAILURES = (KafkaError, ConsumerStoppedError, OSError, TimeoutError, AssertionError)
_LINGERING: set[asyncio.Future[object]] = set()


def _settle_lingering(task: asyncio.Future[object]) -> None:
    _LINGERING.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: a late failure of a background stop is expected


async def finish_lingering(seconds: float) -> None:
    """Give client calls that outlived their bound ``seconds`` more to end (so their
    connections close), then cancel what is still running."""
    loop = asyncio.get_running_loop()
    mine = {task for task in _LINGERING if task.get_loop() is loop}
    if not mine:
        return
    _, pending = await asyncio.wait(mine, timeout=seconds)
    for task in pending:
        task.cancel()


async def bounded(awaitable: Awaitable[object], seconds: float) -> None:
    """Await a client's start/stop/close for at most ``seconds``, swallowing its failure.
    One that outlives the bound is left to end in the background: aiokafka's stop can wait
    on a dead coordinator, and waiting for it (or for its cancellation, as
    ``asyncio.wait_for`` does) would stall the caller — the link's probe loop included."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        # Not cancelled: a stop interrupted half-way leaves its connections open. It goes on
        # in the background; KafkaLink.close() waits a bounded time for what is left.
        _LINGERING.add(task)
        task.add_done_callback(_settle_lingering)
        log.info("a kafka client call did not finish within %ss; left to the background", seconds)
        return
    if not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        if not isinstance(exc, KAFKA_FAILURES):
            log.warning("kafka client call failed: %r", exc)
