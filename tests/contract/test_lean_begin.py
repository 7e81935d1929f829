"""LeanDeliverer.begin, the attempt without a task (docs/benchmarks.md#levers), against real sockets: it is
taken only over a parked connection with a slot free, answers as deliver does, and an
abandoned, late or silent exchange ends as deliver's would (its connection closed, its
slot freed, nothing written twice)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.domain.delivery import Outcome
from cronwire.domain.errors import RequestNotSent
from tests.support.deliverer_sink import make_request
from tests.support.hostile import Conn, Receiver, answer
from tests.support.polling import wait_until


async def ok_but_hang_on_hang(conn: Conn) -> None:
    """Answers ``200 ok`` on the connection it came on, except ``/hang``: read, never
    answered (the connection stays open until the client closes it)."""
    while (request := await conn.request()) is not None:
        if request.path == "/hang":
            await conn.closed_by_client()
            return
        await conn.send(answer(body=b"fine"))


@pytest.fixture
async def deliverer() -> AsyncIterator[LeanDeliverer]:
    lean = LeanDeliverer(TargetGuard(allow_private=True), max_connections=1)
    await lean.start()
    try:
        yield lean
    finally:
        await lean.close()


async def test_begin_needs_a_parked_connection_then_answers_as_deliver_does(
    deliverer: LeanDeliverer,
) -> None:
    async with Receiver(ok_but_hang_on_hang) as receiver:
        assert deliverer.begin(make_request(receiver.url())) is None  # nothing to reuse
        cold = await deliverer.deliver(make_request(receiver.url()))
        begun = deliverer.begin(make_request(receiver.url()))
        assert begun is not None and not isinstance(begun, asyncio.Task)
        warm = await begun
    assert (cold.outcome, cold.status_code, cold.response_excerpt) == (
        Outcome.SUCCESS, 200, "fine")
    assert (warm.outcome, warm.status_code, warm.response_excerpt) == (
        Outcome.SUCCESS, 200, "fine")
    assert warm.started_at <= warm.finished_at
    assert [r.connection for r in receiver.requests] == [0, 0]  # one socket, two requests
    assert (deliverer.stats.connects, deliverer.stats.reuses) == (1, 1)


async def test_a_cancelled_begun_attempt_closes_its_connection_and_frees_its_slot(
    deliverer: LeanDeliverer,
) -> None:
    async with Receiver(ok_but_hang_on_hang) as receiver:
        await deliverer.deliver(make_request(receiver.url()))
        begun = deliverer.begin(make_request(receiver.url("/hang")))
        assert begun is not None
        await wait_until(lambda: len(receiver.requests) == 2, within=5)
        begun.cancel()
        await receiver.wait_closed_by_clients(within=5)  # the abandoned socket is closed
        # The only slot came back: the next attempt is not left waiting for it.
        after = await deliverer.deliver(make_request(receiver.url(), timeout_seconds=2.0))
    assert after.outcome is Outcome.SUCCESS, after
    assert deliverer.stats.connects == 2  # the abandoned connection never went back
    assert [r.connection for r in receiver.requests] == [0, 0, 1]


async def test_a_begun_attempt_past_its_send_window_writes_nothing_and_keeps_the_connection(
    deliverer: LeanDeliverer,
) -> None:
    async with Receiver(ok_but_hang_on_hang) as receiver:
        await deliverer.deliver(make_request(receiver.url()))
        late = make_request(receiver.url(), idempotency_key="late",
                            send_by_monotonic=time.monotonic() - 1.0)
        with pytest.raises(RequestNotSent):
            deliverer.begin(late)
        assert deliverer.idle_connections == 1
        after = await deliverer.deliver(make_request(receiver.url(), idempotency_key="next"))
    assert after.outcome is Outcome.SUCCESS, after
    ids = [r.headers["webhook-id"] for r in receiver.requests]
    assert "late" not in ids and ids[-1] == "next", ids
    assert [r.connection for r in receiver.requests] == [0, 0]  # the same, unspoiled socket


async def test_a_silent_receiver_times_a_begun_attempt_out_and_loses_the_connection(
    deliverer: LeanDeliverer,
) -> None:
    async with Receiver(ok_but_hang_on_hang) as receiver:
        await deliverer.deliver(make_request(receiver.url()))
        begun = deliverer.begin(make_request(receiver.url("/hang"), timeout_seconds=0.3))
        assert begun is not None
        result = await asyncio.wait_for(begun, 5)
        await receiver.wait_closed_by_clients(within=5)
    assert result.outcome is Outcome.TIMEOUT, result
    assert result.error is not None and "no response within 0.3s" in result.error
    assert deliverer.idle_connections == 0
