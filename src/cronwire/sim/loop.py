"""A virtual-time asyncio event loop: deterministic for a seed, and never waits.

It is a ``SelectorEventLoop`` whose ``time()`` is a number it keeps itself and whose
selector, asked to wait for I/O up to the next timer, moves that number to the timer
instead of sleeping. Nothing in the simulation does I/O, so a wait can only end at a
timer; when nothing is ready and no timer is set, every task waits on something that
will never happen, and the loop says so (:class:`Deadlock`) instead of hanging.

Callbacks run in the order asyncio's own ready queue and timer heap give them, which
depends only on what the program scheduled, never on the wall clock. After every
iteration of the loop (one *step*: the callbacks ready at one instant) ``after_step``
runs; the simulator checks its invariants there.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Mapping
from typing import Any


class Deadlock(RuntimeError):
    """Nothing ready and no timer set: the simulated world can never move again."""


class _TimeMachine(selectors.BaseSelector):
    """A selector with nothing to select: a wait for I/O is a jump of the virtual clock."""

    def __init__(self) -> None:
        self.loop: VirtualTimeLoop | None = None
        self._keys: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        # Only the loop's own self-pipe registers; nothing ever writes to it.
        key = selectors.SelectorKey(fileobj, id(fileobj), events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        assert self.loop is not None
        if timeout is None:
            raise Deadlock("no callback ready and no timer set")
        self.loop.advance(timeout)
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys

    def close(self) -> None:
        self._keys.clear()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        machine = _TimeMachine()
        self._now = 0.0
        self.steps = 0
        self.after_step: Callable[[], None] | None = None
        self.tearing_down = False
        super().__init__(machine)
        machine.loop = self
        # Timers at the same virtual instant must all run in the same step: asyncio adds
        # the clock's resolution to "now" when it picks due timers.
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds

    def tear_down(self, rounds: int = 20) -> None:
        """Cancel every task and let them unwind (the simulation is over); then close."""
        self.after_step = None
        self.tearing_down = True
        for _ in range(rounds):
            tasks = [task for task in asyncio.all_tasks(self) if not task.done()]
            if not tasks:
                break
            for task in tasks:
                task.cancel()
            self.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self.close()

    def _run_once(self) -> None:
        super()._run_once()  # type: ignore[misc]
        self.steps += 1
        if self.after_step is not None:
            self.after_step()
