"""Runs the replica's loops as tasks, reports their health and stops them in order."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

LoopBody = Callable[[asyncio.Event], Awaitable[None]]


@dataclass
class Supervisor:
    """Each loop gets a shared ``stopping`` event; it must return soon after it is set.

    A loop that raises is logged and reported unhealthy (``/readyz`` turns 503) rather
    than restarted silently: a crash loop should be visible to the orchestrator.
    """

    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def start(self, name: str, body: LoopBody) -> None:
        task = asyncio.create_task(self._guard(name, body), name=name)
        self._tasks[name] = task

    async def _guard(self, name: str, body: LoopBody) -> None:
        try:
            await body(self.stopping)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loop %s crashed", name)
            raise

    def health(self) -> dict[str, bool]:
        """name -> running. A loop that ended before shutdown is unhealthy."""
        return {name: not task.done() for name, task in self._tasks.items()}

    async def stop(self, grace_seconds: float) -> None:
        """Signal every loop, wait up to ``grace_seconds``, then cancel the rest."""
        self.stopping.set()
        tasks = list(self._tasks.values())
        if not tasks:
            return
        done, pending = await asyncio.wait(tasks, timeout=grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.warning("loop %s ended with %r", task.get_name(), task.exception())
