"""Hostile receivers (ADR 0026): the whole lean deliverer over a real socket, fed randomly split answers
followed (or not) by a second answer that belongs to no request (hypothesis): the next
request on the connection always reads its own answer, never those bytes."""

from __future__ import annotations

import asyncio
import contextlib
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from tests.support.deliverer_sink import make_request
from tests.support.hostile import Conn, Receiver, answer
from tests.support.response_streams import THEIRS, split, streams


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data(), streams, st.booleans())
def test_over_a_socket_the_next_request_never_reads_the_previous_answers_bytes(
    data: st.DataObject, mine: bytes, surplus: bool
) -> None:
    stream = mine + (THEIRS if surplus else b"")
    chunks = data.draw(split(stream))
    asyncio.run(_over_a_socket(chunks))


async def _over_a_socket(chunks: list[bytes]) -> None:
    async def scripted(conn: Conn) -> None:
        while await conn.request() is not None:
            if conn.receiver.requests[-1].path == "/first":
                for chunk in chunks:
                    await conn.send(chunk)
                    await asyncio.sleep(0)
            else:
                await conn.send(answer(418, b"second", reason="SECOND"))

    deliverer = LeanDeliverer(TargetGuard(allow_private=True), max_connections=4)
    await deliverer.start()
    try:
        async with Receiver(scripted) as receiver:
            tenant = UUID(int=7)
            first = await deliverer.deliver(
                make_request(receiver.url("/first"), tenant_id=tenant, timeout_seconds=5))
            second = await deliverer.deliver(
                make_request(receiver.url("/second"), tenant_id=tenant, timeout_seconds=5))
    finally:
        with contextlib.suppress(Exception):
            await deliverer.close()
    assert first.status_code != 599 and "theirs" not in (first.response_excerpt or ""), first
    assert (second.status_code, second.response_excerpt) == (418, "second"), second
