"""The lean deliverer's Slots: a semaphore whose fast path takes a slot without awaiting,
never ahead of a waiter, and never loses one to a cancelled wait."""

from __future__ import annotations

import asyncio

import pytest

from cronwire.adapters.http.slots import Slots


async def test_try_take_takes_free_slots_and_give_frees_them() -> None:
    slots = Slots(2)
    assert slots.try_take() and slots.try_take()
    assert slots.locked() and not slots.try_take()
    slots.give()
    assert not slots.locked() and slots.try_take()


async def test_waiters_are_served_in_order_and_try_take_never_overtakes_them() -> None:
    slots = Slots(1)
    assert slots.try_take()
    served: list[str] = []

    async def wait(name: str) -> None:
        await slots.take()
        served.append(name)

    first, second = asyncio.create_task(wait("first")), asyncio.create_task(wait("second"))
    await asyncio.sleep(0)  # both are waiting now
    slots.give()
    assert not slots.try_take()  # the slot is the first waiter's, not the caller's
    await first
    assert served == ["first"] and not second.done()
    slots.give()
    await second
    assert served == ["first", "second"]
    slots.give()
    assert slots.try_take()


async def test_a_wait_cancelled_as_it_is_served_passes_the_slot_on() -> None:
    slots = Slots(1)
    assert slots.try_take()
    doomed = asyncio.create_task(slots.take())
    patient = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    slots.give()  # handed to the doomed waiter...
    doomed.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await doomed
    await asyncio.wait_for(patient, 1)  # the slot went on to the next waiter
    assert not slots.try_take()
