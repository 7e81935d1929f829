"""The virtual-time loop: time moves to the next timer at once, in the order asyncio
gives, and a world with nothing left to happen says so instead of hanging."""

from __future__ import annotations

import asyncio
import time

import pytest

from cronwire.sim.loop import Deadlock, VirtualTimeLoop


def test_an_hour_of_sleeping_takes_no_wall_time_and_lands_on_the_timer() -> None:
    loop = VirtualTimeLoop()
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await asyncio.sleep(seconds)
        woke.append((name, asyncio.get_running_loop().time()))

    async def main() -> None:
        await asyncio.gather(sleeper("late", 3600.0), sleeper("early", 1.5),
                             sleeper("same", 1.5))

    started = time.perf_counter()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert woke == [("early", 1.5), ("same", 1.5), ("late", 3600.0)]
    # A real sleep would take an hour; a generous bound for a loaded 2-core machine.
    assert time.perf_counter() - started < 5.0


def test_a_timeout_fires_at_its_virtual_instant() -> None:
    loop = VirtualTimeLoop()

    async def main() -> float:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 7.25)
        return asyncio.get_running_loop().time()

    try:
        assert loop.run_until_complete(main()) == pytest.approx(7.25)
    finally:
        loop.close()


def test_nothing_ready_and_no_timer_is_a_deadlock_not_a_hang() -> None:
    loop = VirtualTimeLoop()
    try:
        with pytest.raises(Deadlock):
            loop.run_until_complete(asyncio.Event().wait())
    finally:
        loop.tear_down()


def test_every_step_is_counted_and_followed_by_the_hook() -> None:
    loop = VirtualTimeLoop()
    seen: list[float] = []
    loop.after_step = lambda: seen.append(loop.time())

    async def main() -> None:
        for _ in range(3):
            await asyncio.sleep(2.0)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert loop.steps == len(seen) >= 4
    assert seen == sorted(seen) and seen[-1] == 6.0
