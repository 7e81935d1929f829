"""HTTP/1.1 on one keep-alive connection, as the lean deliverer speaks it: an asyncio
Protocol that only buffers bytes and wakes one waiter, the request written as one buffer,
and the answer parsed by hand (status line, headers, Content-Length, chunked or
read-until-close bodies, at most 1 KiB of it kept).

A connection's ``deadline`` bounds every wait for bytes (TimeoutError past it), so the
attempt's timeout holds however slowly a receiver trickles its answer.
"""

from __future__ import annotations

import asyncio
import zlib

from yarl import URL

from cronwire.domain.delivery import EXCERPT_BYTES
from cronwire.domain.netpolicy import DEFAULT_PORTS

DRAIN_BYTES = 64 * 1024  # read this much past the excerpt to keep a connection reusable
MAX_HEAD_BYTES = 64 * 1024
_NO_BODY_STATUS = frozenset({204, 304})


class ProtocolError(ConnectionError):
    """The receiver's answer is not HTTP/1.x we can read."""


class Connection(asyncio.Protocol):
    """Bytes in, one waiter woken per arrival; nothing else."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        self.idle_since = 0.0
        # The current attempt's end, on the loop's clock: a wait for bytes past it raises
        # TimeoutError. One timer per wait instead of an asyncio.timeout() per attempt
        # (that context manager was ~6% of an executor's CPU in the 100k burst).
        self.deadline: float | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def more(self) -> None:
        """Wait for more bytes; ConnectionError if the peer has gone."""
        if self.closed:
            raise ConnectionResetError("the receiver closed the connection")
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_at(self.deadline, _time_out, waiter) if self.deadline is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    @property
    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()


def _time_out(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class Answer:
    __slots__ = ("body", "complete", "headers", "reason", "status", "version")

    def __init__(self, status: int, reason: str, version: bytes, headers: dict[str, str]) -> None:
        self.status = status
        self.reason = reason
        self.version = version
        self.headers = headers
        self.body = b""
        self.complete = False  # body read to its end: the connection can be reused


def request_bytes(method: str, url: URL, host: str, port: int, headers: dict[str, str],
                   body: bytes) -> bytes:
    host_text = f"[{host}]" if ":" in host else host
    if port != DEFAULT_PORTS[url.scheme]:
        host_text = f"{host_text}:{port}"
    head = [f"{method} {url.raw_path_qs or '/'} HTTP/1.1\r\nHost: {host_text}\r\n"]
    head.extend(f"{name}: {value}\r\n" for name, value in headers.items())
    head.append(f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(head).encode("utf-8") + body


def keeps_alive(answer: Answer) -> bool:
    connection = answer.headers.get("connection", "").lower()
    if answer.version == b"HTTP/1.0":
        return "keep-alive" in connection
    return "close" not in connection


async def read_answer(connection: Connection, method: str) -> Answer:
    answer = await _read_head(connection)
    while 100 <= answer.status <= 199:  # interim answers (100 Continue, 103 Early Hints)
        answer = await _read_head(connection)
    if method == "HEAD" or answer.status in _NO_BODY_STATUS:
        answer.complete = True
        return answer
    encoding = answer.headers.get("transfer-encoding", "").lower()
    if "chunked" in encoding:
        await _read_chunked(connection, answer)
    elif "content-length" in answer.headers:
        try:
            length = int(answer.headers["content-length"])
        except ValueError:
            raise ProtocolError("malformed Content-Length") from None
        await _read_length(connection, answer, length)
    else:  # delimited by the connection's end: read the excerpt, then give it up
        await _read_until_close(connection, answer)
    return answer


async def _read_head(connection: Connection) -> Answer:
    buffer = connection.buffer
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        if len(buffer) > MAX_HEAD_BYTES:
            raise ProtocolError("response head larger than 64 KiB")
        await connection.more()
    lines = bytes(buffer[:end]).split(b"\r\n")
    del buffer[: end + 4]
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    reason = parts[2].decode("latin-1", errors="replace") if len(parts) > 2 else ""
    return Answer(int(parts[1]), reason, parts[0], headers)


async def _read_length(connection: Connection, answer: Answer, length: int) -> None:
    keep = min(length, EXCERPT_BYTES)
    if length > EXCERPT_BYTES + DRAIN_BYTES:  # too long to drain: excerpt, then hang up
        while len(connection.buffer) < keep:
            await connection.more()
        answer.body = bytes(connection.buffer[:keep])
        return
    buffer = connection.buffer
    while len(buffer) < length:
        await connection.more()
    answer.body = bytes(buffer[:keep])
    del buffer[:length]
    answer.complete = True


async def _read_chunked(connection: Connection, answer: Answer) -> None:
    buffer = connection.buffer
    body = bytearray()
    total = 0
    while True:
        while (end := buffer.find(b"\r\n")) < 0:
            await connection.more()
        size_text = bytes(buffer[:end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ProtocolError("malformed chunk size") from None
        del buffer[: end + 2]
        if size == 0:
            while (end := buffer.find(b"\r\n")) != 0:  # trailers, then the empty line
                if end > 0:
                    del buffer[: end + 2]
                else:
                    await connection.more()
            del buffer[:2]
            answer.body = bytes(body)
            answer.complete = True
            return
        total += size
        if total > EXCERPT_BYTES + DRAIN_BYTES:
            answer.body = bytes(body)
            return  # too long: the connection is given up
        while len(buffer) < size + 2:
            await connection.more()
        if len(body) < EXCERPT_BYTES:
            body += buffer[: min(size, EXCERPT_BYTES - len(body))]
        del buffer[: size + 2]


async def _read_until_close(connection: Connection, answer: Answer) -> None:
    buffer = connection.buffer
    while not connection.closed and len(buffer) < EXCERPT_BYTES:
        try:
            await connection.more()
        except ConnectionError:
            break
    answer.body = bytes(buffer[:EXCERPT_BYTES])


def decoded(answer: Answer) -> bytes:
    """The excerpt as the receiver meant it: gzip/deflate bodies are inflated (partly,
    when only the start was read); anything undecodable is kept as it came."""
    encoding = answer.headers.get("content-encoding", "").lower()
    if encoding not in ("gzip", "deflate", "x-gzip"):
        return answer.body
    try:
        inflate = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
        return inflate.decompress(answer.body, EXCERPT_BYTES)
    except zlib.error:
        return answer.body
