"""Issue 22: the response path fed randomly split and mutated byte streams (hypothesis).

The reader (llhttp under our limits) and the whole lean deliverer over a real socket must
never hang, never exceed a limit, never raise anything but a connection/protocol error,
and never hand out an answer made of bytes that belong to another: bytes after an answer
(here a second answer whose reason is THEIRS) mean the connection is not reused.
"""

from __future__ import annotations

import asyncio
import contextlib
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.http1 import ResponseReader
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.http.limits import MAX_HEADERS, MAX_RESPONSE_BYTES
from cronwire.domain.delivery import EXCERPT_BYTES
from tests.support.deliverer_sink import make_request
from tests.support.hostile import Conn, Receiver, answer


def _mine(status: int, body: bytes, framing: str, interim: int) -> bytes:
    head = b"HTTP/1.1 100 Continue\r\n\r\n" * interim
    if framing == "length":
        return head + b"HTTP/1.1 %d MINE\r\nContent-Length: %d\r\n\r\n%s" % (
            status, len(body), body)
    if framing == "chunked":
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part)
                          for part in (body[:7], body[7:]) if part)
        return head + (b"HTTP/1.1 %d MINE\r\nTransfer-Encoding: chunked\r\n\r\n%s"
                       b"0\r\nX-Trailer: t\r\n\r\n" % (status, chunks))
    return head + b"HTTP/1.1 %d MINE\r\nContent-Length: 0\r\n\r\n" % status  # bodiless


THEIRS = b"HTTP/1.1 599 THEIRS\r\nContent-Length: 6\r\n\r\ntheirs"
streams = st.builds(
    _mine,
    st.sampled_from([200, 201, 204, 302, 404, 500, 503]),
    st.binary(max_size=3000),
    st.sampled_from(["length", "chunked", "none"]),
    st.integers(0, 3),
)


@st.composite
def split(draw: st.DrawFn, data: bytes) -> list[bytes]:
    cuts = sorted(draw(st.sets(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(0, 6))):
        if not out:
            break
        where = draw(st.integers(0, len(out) - 1))
        action = draw(st.sampled_from(["flip", "insert", "delete", "repeat"]))
        if action == "flip":
            out[where] = draw(st.integers(0, 255))
        elif action == "insert":
            out[where:where] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del out[where]
        else:
            out[where:where] = out[where:where + 40] * draw(st.integers(1, 3000))
    return bytes(out)


def _read(chunks: list[bytes], method: str = "POST") -> tuple[ResponseReader, Exception | None]:
    """Feed the chunks, then the peer's close: the reader always ends (never hangs)."""
    reader = ResponseReader(method)
    try:
        for chunk in chunks:
            reader.feed(chunk)
            assert reader.received <= MAX_RESPONSE_BYTES + len(chunk)
        reader.eof()
    except ConnectionError as exc:  # ProtocolError and resets: a failed attempt
        return reader, exc
    assert reader.done
    return reader, None


def _within_limits(reader: ResponseReader) -> None:
    if reader.answer is not None:
        assert len(reader.answer.body) <= EXCERPT_BYTES
        assert len(reader.answer.headers) <= MAX_HEADERS
        assert 100 <= reader.answer.status <= 599


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), streams, st.booleans())
def test_a_split_answer_reads_as_one_and_surplus_bytes_forbid_reuse(
    data: st.DataObject, mine: bytes, surplus: bool
) -> None:
    stream = mine + (THEIRS if surplus else b"")
    reader, error = _read(data.draw(split(stream)))
    assert error is None, error
    _within_limits(reader)
    assert reader.answer is not None and reader.answer.reason == "MINE"
    assert b"theirs" not in reader.answer.body
    if surplus:
        assert not reader.reusable  # the next request would have read THEIRS


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), streams, st.booleans())
def test_a_mutated_stream_never_hangs_breaks_a_limit_or_hands_out_theirs(
    data: st.DataObject, mine: bytes, surplus: bool
) -> None:
    first_line = mine.index(b"MINE") + 4  # the status line stays: the answer is MINE's
    stream = mine[:first_line] + data.draw(mutated(mine[first_line:])) + (
        data.draw(mutated(THEIRS)) if surplus else b"")
    reader, _error = _read(data.draw(split(stream)))
    _within_limits(reader)
    if reader.answer is not None:
        assert reader.answer.reason.startswith("MINE"), reader.answer.reason
    if surplus and reader.reusable:
        # Reuse after surplus bytes only if they were all consumed as part of MINE's own
        # framing (a mutation lengthened its body over them): never as a separate answer.
        assert reader.answer is not None


# -- the whole lean deliverer on a real socket ------------------------------------------

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
