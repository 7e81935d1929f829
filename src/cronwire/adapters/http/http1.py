"""HTTP/1.1 on one keep-alive connection, as the lean deliverer speaks it: the request
written as one buffer, the answer parsed by llhttp (through ``httptools``, the parser
behind Node.js and uvicorn) as the bytes arrive, under hard limits (ADR 0026).

A receiver's bytes are hostile input. Each arrival is fed to the parser once and then
dropped (nothing is buffered, nothing is scanned twice), every limit below is checked
on the way, and the attempt's deadline is one loop timer that ends the exchange however
the bytes arrive. A connection is reusable only when one complete, well-framed answer
left nothing behind; a byte that arrives while no request is outstanding closes it.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable

import httptools
from yarl import URL

from cronwire.adapters.http.limits import (
    MAX_BODY_BYTES,
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    MAX_INTERIM,
    MAX_LINE_BYTES,
    MAX_RESPONSE_BYTES,
    MAX_TRAILER_BYTES,
)
from cronwire.domain.delivery import EXCERPT_BYTES
from cronwire.domain.netpolicy import DEFAULT_PORTS


class ProtocolError(ConnectionError):
    """The receiver's answer is not HTTP/1.x we read (or breaks one of our limits)."""


class _Stop(Exception):
    """Raised inside a parser callback to stop llhttp where it stands."""


class Answer:
    __slots__ = ("body", "headers", "keep_alive", "reason", "status")

    def __init__(self, status: int, reason: str, headers: dict[bytes, bytes],
                 keep_alive: bool) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers  # lower-case names, raw values; the first of repeated fields
        self.keep_alive = keep_alive
        self.body = bytearray()  # at most EXCERPT_BYTES of the body, as received

    def header(self, name: bytes) -> str | None:
        value = self.headers.get(name)
        return None if value is None else value.decode("latin-1")


class ResponseReader:
    """The answer to one request, from the bytes of one exchange in arrival order.

    ``feed`` raises ProtocolError for bytes that are not a response we read; ``eof``
    raises ConnectionError when the peer closed before the answer's head was complete.
    ``done`` once the final answer is known; ``reusable`` only if that answer was read to
    its framed end and asked to keep the connection, with no byte after it.

    One reader (one llhttp parser) serves a connection's exchanges in turn: ``begin``
    starts the next. llhttp is back at a message's start only after a reusable answer,
    and only then is the connection (and so this reader) used again.
    """

    __slots__ = ("_body_bytes", "_count", "_head_only", "_headers", "_interim", "_parser",
                 "_reason", "_trailer_bytes", "answer", "done", "received", "reusable")

    def __init__(self, method: str) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._headers: dict[bytes, bytes] = {}
        self._count = 0
        self._reason = b""
        self.begin(method)

    def begin(self, method: str) -> None:
        """Read the answer to the next request, sent with ``method``."""
        self._head_only = method == "HEAD"  # the head is the whole answer (RFC 9110 9.3.2)
        self.answer: Answer | None = None
        self.done = False
        self.reusable = False
        self.received = 0
        self._interim = 0
        self._body_bytes = 0
        self._trailer_bytes = 0

    def feed(self, data: bytes) -> None:
        if self.done:  # anything after the answer: the connection cannot be trusted again
            self.reusable = False
            return
        self.received += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise ProtocolError("101 Switching Protocols was not asked for") from None
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, ProtocolError):
                raise cause from None
            if not isinstance(cause, _Stop):
                raise ProtocolError(f"malformed response: {exc}") from None
        except httptools.HttpParserError as exc:
            raise ProtocolError(f"malformed response: {exc}") from None
        if self.done:
            return
        if self.answer is None and self.received > MAX_HEAD_BYTES:
            raise ProtocolError(f"response head larger than {MAX_HEAD_BYTES // 1024} KiB")
        if self.received > MAX_RESPONSE_BYTES:
            self._cut()  # the status is known; the rest is not read

    def eof(self) -> None:
        """The peer closed its side."""
        if self.done:
            return
        if self.answer is None:
            if self.received == 0:
                raise ConnectionResetError("the receiver closed the connection without answering")
            raise ConnectionResetError("the receiver closed the connection mid-answer")
        self._cut()  # a body delimited by the close, or cut short: the status stands

    def cut(self) -> None:
        """End the exchange where it stands (the deadline passed after the head)."""
        if not self.done:
            self._cut()

    def _cut(self) -> None:
        self.done = True
        self.reusable = False

    # -- llhttp callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.done:  # bytes after the answer (a 204's body, a second answer)
            self.reusable = False
            raise _Stop
        self._headers = {}
        self._count = 0
        self._reason = b""

    def on_status(self, reason: bytes) -> None:
        self._reason += reason
        if len(self._reason) > MAX_LINE_BYTES:
            raise ProtocolError(f"status line longer than {MAX_LINE_BYTES // 1024} KiB")

    def on_header(self, name: bytes, value: bytes) -> None:
        size = len(name) + len(value)
        if self.answer is not None:  # a trailer field
            self._trailer_bytes += size
            if self._trailer_bytes > MAX_TRAILER_BYTES:
                self._cut()
                raise _Stop
            return
        self._count += 1
        if self._count > MAX_HEADERS:
            raise ProtocolError(f"more than {MAX_HEADERS} header fields")
        if size > MAX_LINE_BYTES:
            raise ProtocolError(f"header field longer than {MAX_LINE_BYTES // 1024} KiB")
        self._headers.setdefault(name.lower(), value)

    def on_headers_complete(self) -> None:
        parser = self._parser
        status = parser.get_status_code()
        if status == 101:
            raise ProtocolError("101 Switching Protocols was not asked for")
        if 100 <= status <= 199:  # interim (100 Continue, 103 Early Hints): no body
            self._interim += 1
            if self._interim > MAX_INTERIM:
                raise ProtocolError(f"more than {MAX_INTERIM} interim (1xx) answers")
            return
        if not 200 <= status <= 599:
            raise ProtocolError(f"status {status} is outside 100-599")
        self.answer = Answer(status, self._reason.decode("latin-1"), self._headers,
                             parser.should_keep_alive())
        if self._head_only:
            # llhttp cannot be told that this head has no body (httptools does not pass
            # on_headers_complete's "no body" return on), so it stops here, and the
            # connection, whose framing it can no longer vouch for, is not reused.
            self._cut()
            raise _Stop

    def on_body(self, data: bytes) -> None:
        answer = self.answer
        if answer is None:
            return
        self._body_bytes += len(data)
        room = EXCERPT_BYTES - len(answer.body)
        if room > 0:
            answer.body += data[:room]
        if self._body_bytes > MAX_BODY_BYTES:
            self._cut()
            raise _Stop

    def on_message_complete(self) -> None:
        answer = self.answer
        if answer is None:  # an interim answer ended; the final one follows
            return
        self.done = True
        self.reusable = answer.keep_alive


class Connection(asyncio.Protocol):
    """One keep-alive connection: bytes are fed to the current exchange's reader as they
    arrive; a byte with no exchange outstanding closes the connection."""

    reader_class = ResponseReader  # the benchmark of ADR 0026 swaps in an h11 reader
    __slots__ = ("_reader", "_waiter", "closed", "idle_since", "on_idle_close", "reader",
                 "reused", "transport")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False  # served an earlier request
        self.idle_since = 0.0
        self.on_idle_close: Callable[[Connection], None] | None = None  # set by the pool
        self.reader: ResponseReader | None = None  # the current exchange's, None while idle
        self._reader: ResponseReader | None = None  # kept between exchanges
        self._waiter: asyncio.Future[Answer] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        waiter = self._waiter
        if reader is None or waiter is None or waiter.done():
            self.abort()  # nothing was asked: a stale or unsolicited answer
            return
        try:
            reader.feed(data)
        except ConnectionError as exc:
            self._fail(exc)
            return
        if reader.done:
            self._finish()

    def eof_received(self) -> bool:
        self._peer_closed()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._peer_closed()

    def _peer_closed(self) -> None:
        self.closed = True
        reader, waiter = self.reader, self._waiter
        if reader is None or waiter is None or waiter.done():
            if self.on_idle_close is not None:
                self.on_idle_close(self)  # an idle connection leaves the pool
            return
        try:
            reader.eof()
        except ConnectionError as exc:
            self._fail(exc)
            return
        self._finish()

    def _deadline_passed(self) -> None:
        reader, waiter = self.reader, self._waiter
        if reader is None or waiter is None or waiter.done():
            return
        if reader.answer is not None:  # the head arrived in time: it is the answer
            reader.cut()
            self._finish()
        else:
            self._fail(TimeoutError())

    def _finish(self) -> None:
        reader, waiter = self.reader, self._waiter
        assert reader is not None and reader.answer is not None and waiter is not None
        if not reader.reusable:
            self.abort()  # stop reading a receiver that has more to say
        if not waiter.done():
            waiter.set_result(reader.answer)

    def _fail(self, exc: BaseException) -> None:
        self.abort()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    async def exchange(self, data: bytes, method: str, deadline: float) -> Answer:
        """Write one request and read its answer; TimeoutError if no head by ``deadline``
        (the loop's clock), ConnectionError/ProtocolError for anything else."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        reader = self._reader
        if reader is None:
            reader = self._reader = self.reader_class(method)
        else:
            reader.begin(method)
        self.reader = reader
        waiter: asyncio.Future[Answer] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_at(deadline, self._deadline_passed)
        try:
            self.transport.write(data)
            return await waiter
        finally:
            timer.cancel()

    @property
    def usable(self) -> bool:
        """Open, and its last exchange (if any) ended in a complete, reusable answer."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        reader = self.reader
        return reader is None or (reader.done and reader.reusable)

    def park(self) -> None:
        """Between requests: a byte arriving now closes the connection."""
        self.reader = None
        self._waiter = None

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def request_bytes(method: str, url: URL, host: str, port: int, headers: dict[str, str],
                  body: bytes) -> bytes:
    host_text = f"[{host}]" if ":" in host else host
    if port != DEFAULT_PORTS[url.scheme]:
        host_text = f"{host_text}:{port}"
    head = [f"{method} {url.raw_path_qs or '/'} HTTP/1.1\r\nHost: {host_text}\r\n"]
    head.extend(f"{name}: {value}\r\n" for name, value in headers.items())
    head.append(f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(head).encode("utf-8") + body


def decoded(answer: Answer) -> bytes:
    """The excerpt as the receiver meant it: gzip/deflate bodies are inflated (partly,
    when only the start was read); anything undecodable is kept as it came."""
    body = bytes(answer.body)
    encoding = answer.headers.get(b"content-encoding", b"").lower()
    if encoding not in (b"gzip", b"deflate", b"x-gzip"):
        return body
    try:
        inflate = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
        return inflate.decompress(body, EXCERPT_BYTES)
    except zlib.error:
        return body
