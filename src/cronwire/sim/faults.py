"""Faults at run time: which replica incarnations are alive, when the database is away,
which calls lose their acknowledgement, and the crash that strikes inside a call.

A crashed replica's code may still run (its tasks are cancelled and unwind), but nothing
it does reaches the world any more: every port call of a dead incarnation waits for ever
(:func:`park`), as a killed process's would never arrive.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from cronwire.domain.errors import StorageError
from cronwire.sim.scenario import Crash, LostAck, Outage, Scenario, Stall
from cronwire.sim.trace import Trace


@dataclass(eq=False)
class Life:
    """One incarnation of a replica (index -1: the tenants' API, which never crashes)."""

    index: int
    incarnation: int
    alive: bool = True
    calls: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    in_flight: int = 0  # requests this incarnation has at receivers and awaits

    @property
    def owner(self) -> str:
        return "api" if self.index < 0 else f"r{self.index}.{self.incarnation}"


async def park() -> NoReturn:
    """Wait for ever: what a dead process's call does. (While the simulation is torn
    down, the wait ends at once, so that every task unwinds.)"""
    loop = asyncio.get_running_loop()
    if not getattr(loop, "tearing_down", False):
        await loop.create_future()
    raise asyncio.CancelledError


class FaultState:
    def __init__(self, scenario: Scenario, trace: Trace, now: Callable[[], float],
                 crash: Callable[[Life, Crash], None]) -> None:
        self._trace = trace
        self._now = now
        self._crash = crash
        self.outages = sorted((o.at, o.at + o.seconds) for o in scenario.items
                              if isinstance(o, Outage))
        self._lost = {(a.replica, a.call) for a in scenario.items if isinstance(a, LostAck)}
        self._in_call: list[Crash] = sorted(
            (c for c in scenario.items if isinstance(c, Crash) and c.in_call),
            key=lambda c: c.at)
        self._stalls: dict[int, list[tuple[float, float]]] = {}
        for stall in scenario.items:
            if isinstance(stall, Stall):
                self._stalls.setdefault(stall.replica, []).append(
                    (stall.at, stall.at + stall.seconds))
        self.quiet = False  # set after the horizon: no more faults

    async def held(self, life: Life) -> None:
        """While ``life``'s replica is stopped, wait for it to go on."""
        for start, end in self._stalls.get(life.index, ()):
            t = self._now()
            if start <= t < end:
                await asyncio.sleep(end - t)

    def stalled_between(self, life: Life, start: float, end: float) -> bool:
        return any(s < end and start < e for s, e in self._stalls.get(life.index, ()))

    def db_down(self) -> bool:
        if self.quiet:
            return False
        t = self._now()
        return any(start <= t < end for start, end in self.outages)

    def outage_between(self, start: float, end: float) -> bool:
        return any(s < end and start < e for s, e in self.outages)

    async def enter(self, life: Life, what: str) -> Crash | None:
        """Before a database call: park a dead caller, raise during an outage; the crash
        due inside this call, if one is."""
        if not life.alive:
            await park()
        await self.held(life)
        if not life.alive:
            await park()
        life.calls += 1
        if self.db_down():
            self._trace.add("db-down", f"{life.owner} {what}")
            raise StorageError("simulated outage: the database is unreachable")
        if self.quiet or life.index < 0:
            return None
        t = self._now()
        for crash in self._in_call:
            if crash.replica == life.index and crash.at <= t:
                self._in_call.remove(crash)
                if not crash.applied:
                    self._trace.add("crash-in-call", f"{life.owner} {what} before it applied")
                    self._crash(life, crash)
                    await park()
                return crash
        return None

    async def leave(self, life: Life, what: str, crash: Crash | None) -> None:
        """After a call applied: the crash due inside it, or the acknowledgement lost."""
        if crash is not None:
            self._trace.add("crash-in-call", f"{life.owner} {what} after it applied")
            self._crash(life, crash)
            await park()
        await self.held(life)
        if not life.alive:
            await park()
        if not self.quiet and (life.index, life.calls) in self._lost:
            self._trace.add("ack-lost", f"{life.owner} {what}")
            raise StorageError("simulated: the commit applied, its acknowledgement was lost")
