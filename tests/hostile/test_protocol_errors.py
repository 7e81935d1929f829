"""Answers outside HTTP/1.1 end promptly as recorded protocol errors
(never a status the attempt table cannot hold, never a wait for the timeout), and
control characters in a tenant's header values are never sent."""

from __future__ import annotations

import time

import pytest

from cronwire.domain.delivery import Outcome
from tests.support.deliverer_sink import Deliverer, make_request
from tests.support.hostile import Conn, Receiver

TIMEOUT = 3.0
BAD_STATUS = {
    "40000": b"HTTP/1.1 40000 Huge\r\nContent-Length: 0\r\n\r\n",
    "0200": b"HTTP/1.1 0200 OK\r\nContent-Length: 0\r\n\r\n",
    "099": b"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n",
    "600": b"HTTP/1.1 600 High\r\nContent-Length: 0\r\n\r\n",
    "999": b"HTTP/1.1 999 High\r\nContent-Length: 0\r\n\r\n",
}


def answering(data: bytes):  # type: ignore[no-untyped-def]
    async def behaviour(conn: Conn) -> None:
        await conn.request()
        await conn.send(data)
        await conn.closed_by_client()

    return behaviour


@pytest.mark.parametrize("data", list(BAD_STATUS.values()), ids=list(BAD_STATUS))
async def test_a_status_outside_100_599_is_a_protocol_error(deliverer: Deliverer,
                                                            data: bytes) -> None:
    async with Receiver(answering(data)) as receiver:
        result = await deliverer.deliver(make_request(receiver.url(), timeout_seconds=TIMEOUT))
    assert (result.outcome, result.status_code) == (Outcome.CONNECTION_ERROR, None), result
    assert result.error and "status" in result.error.lower(), result


async def test_a_bare_lf_answer_ends_at_once(deliverer: Deliverer) -> None:
    """Read (h11 accepts bare LF) or refused (llhttp does not): either way at once, never
    a wait for the timeout with the answer sitting there."""
    data = b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"
    async with Receiver(answering(data)) as receiver:
        began = time.monotonic()
        result = await deliverer.deliver(make_request(receiver.url(), timeout_seconds=TIMEOUT))
    assert result.outcome is not Outcome.TIMEOUT, result
    assert time.monotonic() - began < TIMEOUT, result


@pytest.mark.parametrize("value", ["a\x0bb", "a\x0cb", "a\x85b", "a\x7fb", "a\x00b", "a\rb"],
                         ids=["VT", "FF", "NEL", "DEL", "NUL", "CR"])
async def test_a_header_value_with_a_control_character_is_never_sent(
    deliverer: Deliverer, value: str
) -> None:
    async with Receiver(answering(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) as receiver:
        result = await deliverer.deliver(make_request(receiver.url(), headers={"x-v": value}))
    assert result.outcome is Outcome.BLOCKED and "control character" in (result.error or "")
    assert receiver.requests == []


async def test_a_tab_in_a_header_value_is_sent(deliverer: Deliverer) -> None:
    async with Receiver(answering(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) as receiver:
        result = await deliverer.deliver(make_request(receiver.url(), headers={"x-v": "a\tb"}))
    assert result.outcome is Outcome.SUCCESS, result
    assert receiver.requests[0].headers["x-v"] == "a\tb"
