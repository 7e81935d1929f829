"""The CPU lane (adapters/cpu_lane.py): work runs on the lane's own thread, one piece after
another in the order handed over; errors come back to the caller; work whose caller was
cancelled before it started never runs."""

from __future__ import annotations

import asyncio
import threading

import pytest

from cronwire.adapters.cpu_lane import CpuLane
from cronwire.domain.errors import StorageError


async def test_work_runs_off_the_loop_thread_in_order() -> None:
    lane = CpuLane()
    order: list[int] = []
    try:
        def work(n: int) -> int:
            order.append(n)
            return threading.get_ident()

        threads = await asyncio.gather(*(lane.run(lambda n=n: work(n)) for n in range(20)))
    finally:
        lane.close()
    assert order == list(range(20))
    assert len(set(threads)) == 1 and threading.get_ident() not in threads


async def test_an_error_of_the_work_reaches_the_caller() -> None:
    lane = CpuLane()
    try:
        with pytest.raises(ZeroDivisionError):
            await lane.run(lambda: 1 // 0)
    finally:
        lane.close()


async def test_work_of_a_cancelled_caller_that_had_not_started_never_runs() -> None:
    lane = CpuLane()
    release = threading.Event()
    ran: list[str] = []
    try:
        busy = asyncio.ensure_future(lane.run(lambda: release.wait(10)))
        queued = asyncio.ensure_future(lane.run(lambda: ran.append("queued")))
        await asyncio.sleep(0)  # both handed to the lane
        queued.cancel()
        # The cancel reaches the executor's future in a loop callback: let it run before
        # the busy walk ends and frees the worker.
        for _ in range(3):
            await asyncio.sleep(0)
        release.set()
        assert await busy is True
        assert await lane.run(lambda: "after") == "after"
    finally:
        lane.close()
    assert ran == []


async def test_a_closed_lane_answers_storage_error_to_queued_and_new_work() -> None:
    lane = CpuLane()
    release = threading.Event()
    busy = asyncio.ensure_future(lane.run(lambda: release.wait(10)))
    queued = asyncio.ensure_future(lane.run(lambda: "never"))
    await asyncio.sleep(0)
    lane.close()
    release.set()
    assert await busy is True  # a walk in progress still finishes
    with pytest.raises(StorageError, match="shutting down"):
        await queued
    with pytest.raises(StorageError, match="shutting down"):
        await lane.run(lambda: "too late")
