"""Hypothesis strategies for HTTP/1.1 answer byte streams (tests/hostile): a well-formed
answer whose reason is MINE in several framings, the answer that belongs to no request
(THEIRS), random splits and mutations."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st


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
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


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


