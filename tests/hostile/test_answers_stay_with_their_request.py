"""No answer is ever read for a request it does not belong to, least of
all another tenant's. Bytes after a complete answer (a second answer, a 204's "body", a
smuggled request's answer), or framing llhttp refuses (Content-Length -1 or 1_0, two
different lengths), never become the next request's answer: the connection is not reused.
"""

from __future__ import annotations

import asyncio

import pytest

from cronwire.domain.delivery import Outcome
from tests.support.deliverer_sink import TENANT_A, TENANT_B, Deliverer, make_request
from tests.support.hostile import SMUGGLED_REQUEST, Conn, Receiver, answer, ignores_get_bodies


async def test_a_second_answer_in_the_same_write_never_reaches_another_tenant(
    deliverer: Deliverer,
) -> None:
    async def two_answers(conn: Conn) -> None:
        while (request := await conn.request()) is not None:
            n = len(conn.receiver.requests)
            await conn.send(answer(200, f"answer-{n}".encode())
                            + answer(200, f"stale-after-{n}".encode()))
            del request

    async with Receiver(two_answers) as receiver:
        results = [await deliverer.deliver(make_request(receiver.url(), tenant_id=tenant))
                   for tenant in (TENANT_A, TENANT_B, TENANT_A, TENANT_A)]
    assert [r.response_excerpt for r in results] == [f"answer-{n}" for n in range(1, 5)]
    assert len(receiver.requests) == 4


async def test_a_late_unsolicited_answer_closes_the_idle_connection(deliverer: Deliverer) -> None:
    """A 200 and, a moment later, a second unsolicited 200: the next delivery records the
    real 500, never the stale 200."""
    stale_sent = asyncio.Event()

    async def late_second_answer(conn: Conn) -> None:
        while await conn.request() is not None:
            if len(conn.receiver.requests) == 1:
                await conn.send(answer(200, b"first"))
                await asyncio.sleep(0.05)
                await conn.send(answer(200, b"stale"))
                stale_sent.set()
                await conn.closed_by_client()
                return
            await conn.send(answer(500, b"real", reason="Oops"))

    async with Receiver(late_second_answer) as receiver:
        first = await deliverer.deliver(make_request(receiver.url()))
        await asyncio.wait_for(stale_sent.wait(), 10)
        await receiver.wait_closed_by_clients()  # the stale bytes closed it
        second = await deliverer.deliver(make_request(receiver.url()))
    assert (first.status_code, first.response_excerpt) == (200, "first")
    assert (second.status_code, second.response_excerpt) == (500, "real"), second


async def test_a_get_body_smuggled_as_a_second_request_never_answers_another_tenant(
    deliverer: Deliverer,
) -> None:
    """The issue's reproduction: the receiver ignores bodies on GET, so tenant B's GET body
    is read as a second request and answered too; tenant A's deliveries must still read
    only their own answers, and B never reads A's."""

    smuggled = SMUGGLED_REQUEST.encode()
    async with Receiver(ignores_get_bodies) as receiver:
        seen: dict[str, list[str | None]] = {"A": [], "B": []}
        for _ in range(3):
            b = await deliverer.deliver(make_request(
                receiver.url("/b"), tenant_id=TENANT_B, method="GET", body=smuggled))
            a = await deliverer.deliver(make_request(receiver.url("/a"), tenant_id=TENANT_A))
            seen["B"].append(b.response_excerpt)
            seen["A"].append(a.response_excerpt)
    assert seen["A"] == ["private-to-A"] * 3, seen
    assert "private-to-A" not in seen["B"], seen


# Each answers the first request; the second request must get its own real answer (500).
MISFRAMED = {
    "content-length -1": b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"
                         b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
    "content-length 1_0": b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\n"
                          b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
    "two content-lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n"
                           b"okHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
    "204 with a body": b"HTTP/1.1 204 No Content\r\nContent-Length: 40\r\n\r\n"
                       b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
    "304 with a body": b"HTTP/1.1 304 Not Modified\r\n\r\n"
                       b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
}


@pytest.mark.parametrize("first_answer", list(MISFRAMED.values()), ids=list(MISFRAMED))
async def test_misframed_answers_never_leave_bytes_for_the_next_request(
    deliverer: Deliverer, first_answer: bytes
) -> None:
    async def misframe_then_fail(conn: Conn) -> None:
        while await conn.request() is not None:
            if len(conn.receiver.requests) == 1:
                await conn.send(first_answer)
            else:
                await conn.send(answer(500, b"real", reason="Oops"))

    async with Receiver(misframe_then_fail) as receiver:
        first = await deliverer.deliver(make_request(receiver.url()))
        second = await deliverer.deliver(make_request(receiver.url()))
    assert first.response_excerpt != "stale", first
    if first.status_code is None:  # refused framing: a failed attempt, said so
        assert first.outcome is Outcome.CONNECTION_ERROR and first.error, first
    assert (second.status_code, second.response_excerpt) == (500, "real"), second
