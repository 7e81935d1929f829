"""Runs the replica's loops as tasks, reports their health and stops them in order."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

LoopBody = Callable[[asyncio.Event], Awaitable[None]]


class LoopCrashed(Exception):
    """Raised by a loop body when one of its own inner loops died; names that inner loop
    (e.g. ``executor-writer``) so ``/readyz`` can say which one."""

    def __init__(self, loop: str) -> None:
        super().__init__(f"loop {loop} crashed")
        self.loop = loop


async def first_failure(
    main: asyncio.Task[None], companions: Sequence[asyncio.Task[None]]
) -> asyncio.Task[None] | None:
    """Wait for ``main`` to finish while watching ``companions`` (loops meant to run until
    cancelled). Returns the first task that failed: a companion that ended at all, or
    ``main`` if it raised; None when ``main`` returned normally."""
    watched = [main, *companions]
    done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    for task in companions:
        if task in done:
            return task
    if main.cancelled() or main.exception() is not None:
        return main
    return None


async def all_or_none(loops: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run ``loops`` together until every one has returned; the first to raise cancels the
    others and its exception is raised as it is (not in a group), so whoever supervises
    names the task running this, as it would name a single loop."""
    tasks = [asyncio.create_task(loop) for loop in loops]
    try:
        done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if not task.cancelled() and (error := task.exception()) is not None:
                raise error
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class Supervisor:
    """Each loop gets a shared ``stopping`` event; it must return soon after it is set.

    A loop that raises is logged, reported unhealthy (``/readyz`` turns 503, naming the
    loop, and the inner loop when the body raised :class:`LoopCrashed`) and sets
    ``crashed``, on which ``serve`` stops the whole replica with a non-zero status: a
    crash should be visible to the orchestrator, which restarts the process, rather than
    leave a replica that looks alive with one of its loops gone.
    """

    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    crashed: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _crashed_inner: dict[str, str] = field(default_factory=dict)  # loop -> inner loop

    def start(self, name: str, body: LoopBody) -> None:
        task = asyncio.create_task(self._guard(name, body), name=name)
        self._tasks[name] = task

    async def _guard(self, name: str, body: LoopBody) -> None:
        try:
            await body(self.stopping)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, LoopCrashed):
                self._crashed_inner[name] = exc.loop
                log.error("loop %s crashed in %s", name, exc.loop)
            else:
                log.exception("loop %s crashed", name)
            self.crashed.set()
            raise

    def health(self) -> dict[str, bool]:
        """name -> running. A loop that ended before shutdown is unhealthy; the inner loop
        that brought it down, when it said so, is reported under its own name too."""
        health = {name: not task.done() for name, task in self._tasks.items()}
        health.update({inner: False for inner in self._crashed_inner.values()})
        return health

    @property
    def crashed_loops(self) -> list[str]:
        return sorted(
            self._crashed_inner.get(name, name) for name, task in self._tasks.items()
            if task.done() and not task.cancelled() and task.exception() is not None
        )

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
