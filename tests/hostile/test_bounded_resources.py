"""Hostile receivers (ADR 0026) on real sockets, for both deliverers: memory, sockets and time stay
bounded whatever a receiver sends.

- item 2: a receiver that answers and then keeps streaming on the idle connection is cut
  off (nothing keeps reading it);
- item 3: idle connections are capped per key and in total and closed after the idle
  timeout, however many keys (origins) one tenant spreads its targets over;
- item 4: a receiver that never stops sending (an endless chunk-size line, endless
  trailers, a stream of 100 Continue) costs one attempt that ends within its timeout,
  under the caps, without stalling the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import tracemalloc
from collections.abc import AsyncIterator

import pytest

from cronwire.adapters.http.guard import TargetGuard
from cronwire.domain.delivery import Outcome
from tests.support.deliverer_sink import ADAPTERS, TENANT_A, Deliverer, make_request
from tests.support.hostile import (
    Conn,
    LoopLag,
    Receiver,
    answer,
    endless_chunk_size_line,
    endless_continue,
    endless_trailers,
    keep_alive_ok,
    measured,
)
from tests.support.polling import wait_until

CHUNK = b"\0" * 65536
TIMEOUT = 1.0
SLACK = 3.0  # a shared 2-core machine may be slow to schedule us
MAX_HEAP_GROWTH = 16 * 1024 * 1024
MAX_STALL = 0.5  # the old framing rescanned its whole buffer per arrival: 1.6 s stalls


@contextlib.asynccontextmanager
async def deliverer_with(name: str, **options: int) -> AsyncIterator[Deliverer]:
    adapter = ADAPTERS[name](TargetGuard(allow_private=True), **options)
    await adapter.start()
    try:
        yield adapter
    finally:
        await adapter.close()


# -- item 2: memory ----------------------------------------------------------------------

async def test_a_receiver_that_streams_after_answering_is_cut_off(deliverer: Deliverer) -> None:
    async def answer_then_stream(conn: Conn) -> None:
        await conn.request()
        await conn.send(answer(200, b"ok"))
        for _ in range(1024):  # 64 MiB at most, should nothing ever hang up
            await conn.send(CHUNK)
        await conn.closed_by_client()

    async with Receiver(answer_then_stream) as receiver:
        tracemalloc.start()
        try:
            result = await deliverer.deliver(make_request(receiver.url()))
            await receiver.wait_closed_by_clients(within=15)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert (result.outcome, result.response_excerpt) == (Outcome.SUCCESS, "ok"), result
    assert peak < MAX_HEAP_GROWTH, peak


# -- item 3: sockets ---------------------------------------------------------------------

async def test_idle_connections_are_closed_after_the_idle_timeout(deliverer: Deliverer) -> None:
    release = asyncio.Event()

    async def slow_keep_alive(conn: Conn) -> None:
        while await conn.request() is not None:
            await release.wait()  # so that all 125 are in flight at once
            await conn.send(answer())

    async with Receiver(slow_keep_alive) as receiver:
        flights = [asyncio.ensure_future(deliverer.deliver(make_request(receiver.url())))
                   for _ in range(125)]
        await wait_until(lambda: len(receiver.requests) == 125, within=30)
        release.set()
        results = await asyncio.gather(*flights)
        assert {r.outcome for r in results} == {Outcome.SUCCESS}
        assert receiver.opened == 125
        await receiver.wait_closed_by_clients(within=30)  # reaped, not kept for ever


@pytest.mark.parametrize("name", sorted(ADAPTERS))
async def test_one_tenant_spreading_over_many_origins_holds_a_bounded_number_of_sockets(
    name: str,
) -> None:
    """40 origins (wildcard subdomains, in effect), one after another: the sockets left
    open never exceed max_connections."""
    async with contextlib.AsyncExitStack() as stack:
        receivers = [await stack.enter_async_context(Receiver(keep_alive_ok))
                     for _ in range(40)]
        deliverer = await stack.enter_async_context(deliverer_with(name, max_connections=8))
        most = 0
        for receiver in receivers:
            result = await deliverer.deliver(make_request(receiver.url(), tenant_id=TENANT_A))
            assert result.outcome is Outcome.SUCCESS, result
            await asyncio.sleep(0.01)  # closes reach the receivers
            most = max(most, sum(r.open_now for r in receivers))
    assert most <= 8, most


@pytest.mark.parametrize("name", sorted(ADAPTERS))
async def test_idle_connections_per_key_are_capped(name: str) -> None:
    async with Receiver(keep_alive_ok) as receiver, deliverer_with(
            name, max_connections=64, **({"max_idle_per_key": 4} if name == "lean" else {})
    ) as deliverer:
        await asyncio.gather(*(deliverer.deliver(make_request(receiver.url()))
                               for _ in range(40)))
        await wait_until(lambda: receiver.open_now <= 4, within=10)


# -- item 4: a hard deadline ---------------------------------------------------------------

async def continue_drip(conn: Conn) -> None:
    """Slowly enough that no size limit is reached: only the deadline ends it."""
    await conn.request()
    while True:
        await conn.send(b"HTTP/1.1 100 Continue\r\n\r\n"[:8])
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("behaviour", [endless_chunk_size_line, endless_trailers,
                                       endless_continue, continue_drip],
                         ids=lambda b: b.__name__)
async def test_a_receiver_that_never_stops_sending_costs_one_bounded_attempt(
    deliverer: Deliverer, behaviour: object
) -> None:
    async with Receiver(behaviour) as receiver, LoopLag() as lag:  # type: ignore[arg-type]
        attempt = await measured(deliverer,
                                 make_request(receiver.url(), timeout_seconds=TIMEOUT))
    result = attempt.result
    assert attempt.seconds < TIMEOUT + SLACK, attempt
    assert attempt.heap_peak < MAX_HEAP_GROWTH, attempt
    assert lag.worst < MAX_STALL, (result, lag.worst)
    assert result.error or result.outcome is Outcome.SUCCESS, result
