"""Hostile receivers (ADR 0026): the response path fed randomly split and mutated byte streams (hypothesis).

The reader (llhttp under our limits) and the whole lean deliverer over a real socket must
never hang, never exceed a limit, never raise anything but a connection/protocol error,
and never hand out an answer made of bytes that belong to another: bytes after an answer
(here a second answer whose reason is THEIRS) mean the connection is not reused.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwire.adapters.http.limits import MAX_HEADERS, MAX_RESPONSE_BYTES
from cronwire.adapters.http.response_reader import ResponseReader
from cronwire.domain.delivery import EXCERPT_BYTES
from tests.support.response_streams import THEIRS, mutated, split, streams


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


def test_the_answer_to_head_ends_at_its_head_and_is_not_reused() -> None:
    """llhttp cannot be told (through httptools) that a HEAD answer has no body, so the
    reader stops at the head and the connection is given up."""
    reader, error = _read([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"], method="HEAD")
    assert error is None and reader.answer is not None
    assert (reader.answer.status, bytes(reader.answer.body), reader.reusable) == (200, b"", False)


def test_a_body_delimited_by_the_close_ends_at_eof_and_is_not_reused() -> None:
    reader, error = _read([b"HTTP/1.0 500 Oops\r\n\r\nuntil ", b"close"])
    assert error is None and reader.answer is not None
    assert (reader.answer.status, bytes(reader.answer.body), reader.reusable) == (
        500, b"until close", False)


def test_interim_answers_are_passed_over_and_bounded() -> None:
    reader, error = _read([b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" * 3
                           + b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"])
    assert error is None and reader.answer is not None and reader.reusable
    assert (reader.answer.status, bytes(reader.answer.body)) == (201, b"ok")
    _, flood = _read([b"HTTP/1.1 100 Continue\r\n\r\n" * 9])
    assert flood is not None and "interim" in str(flood)
