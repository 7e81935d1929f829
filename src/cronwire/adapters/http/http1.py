"""HTTP/1.1 on one keep-alive connection, as the lean deliverer speaks it: the request
written as one buffer, the answer parsed by llhttp (through ``httptools``, the parser
behind Node.js and uvicorn) as the bytes arrive, under hard limits (ADR 0026).

A receiver's bytes are hostile input. Each arrival is fed to the answer's reader once
(response_reader.py: llhttp, under every limit), and the attempt's deadline is one loop timer that ends the exchange however
the bytes arrive. A connection is reusable only when one complete, well-framed answer
left nothing behind; a byte that arrives while no request is outstanding closes it.
"""

from __future__ import annotations

import asyncio
import select
import ssl
import zlib
from collections.abc import Callable

from yarl import URL

from cronwire.adapters.http.response_reader import Answer, ResponseReader
from cronwire.domain.delivery import EXCERPT_BYTES
from cronwire.domain.errors import RequestNotSent
from cronwire.domain.netpolicy import DEFAULT_PORTS


class Connection(asyncio.Protocol):
    """One keep-alive connection: bytes are fed to the current exchange's reader as they
    arrive; a byte with no exchange outstanding closes the connection."""

    reader_class = ResponseReader  # the benchmark of ADR 0026 swaps in an h11 reader
    __slots__ = ("_loop", "_poller", "_reader", "_timer", "_waiter", "closed", "idle_since",
                 "on_idle_close", "reader", "reused", "transport")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False  # served an earlier request
        self.idle_since = 0.0
        self.on_idle_close: Callable[[Connection], None] | None = None  # set by the pool
        self.reader: ResponseReader | None = None  # the current exchange's, None while idle
        self._reader: ResponseReader | None = None  # kept between exchanges
        self._waiter: asyncio.Future[Answer] | None = None
        self._poller: select.poll | None = None  # the socket, registered once
        self._timer: asyncio.TimerHandle | None = None  # the current exchange's deadline
        self._loop: asyncio.AbstractEventLoop | None = None  # set with the transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._poller = _socket_poller(transport)
        # The loop that made the transport; asyncio.get_running_loop() asks getpid() on
        # every call (~2% of a burst's CPU when asked per request).
        self._loop = asyncio.get_running_loop()

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
        if isinstance(exc, ssl.SSLError) and self._waiter is not None:
            self.closed = True  # the TLS layer says why: a receiver's alert (certificate
            self._fail(exc)     # required, unknown CA) is the attempt's evidence, not a reset
            return
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
        self._stop_timer()
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

    def exchange(self, data: bytes, method: str, deadline: float,
                 send_by: float | None = None,
                 monotonic: Callable[[], float] | None = None) -> asyncio.Future[Answer]:
        """Write one request; the future is its answer, or TimeoutError if no head came
        by ``deadline`` (the loop's clock), ConnectionError/ProtocolError for anything
        else. A future, not a coroutine: one frame less per delivery on the hot path.

        RequestNotSent, with nothing written, if ``monotonic()`` has passed ``send_by``:
        read as the very last step before the write (ADR 0022), because a process
        stopped between that reading and the write sends once it wakes."""
        assert self.transport is not None
        loop = self._loop
        assert loop is not None
        reader = self._reader
        if reader is None:
            reader = self._reader = self.reader_class(method)
        else:
            reader.begin(method)
        self.reader = reader
        waiter: asyncio.Future[Answer] = loop.create_future()
        self._waiter = waiter
        self._timer = loop.call_at(deadline, self._deadline_passed)
        if send_by is not None and monotonic is not None and monotonic() > send_by:
            self._stop_timer()
            self.park()  # nothing was written: the connection is as it was
            raise RequestNotSent("send window closed before the request was written")
        self.transport.write(data)
        return waiter

    @property
    def reusable(self) -> bool:
        """Open, and its last exchange (if any) ended in a complete, reusable answer: worth
        parking. Whether bytes wait unread is asked at checkout (:attr:`usable`), the
        moment that matters, not here as well."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        reader = self.reader
        return reader is None or (reader.done and reader.reusable)

    @property
    def usable(self) -> bool:
        """:attr:`reusable`, and no byte waits unread in the kernel: bytes the loop has not
        handed to :meth:`data_received` yet (a surplus answer sent right after the last
        one) would otherwise be read as the next request's answer."""
        return self.reusable and not _bytes_waiting(self._poller)

    def park(self) -> None:
        """Between requests: a byte arriving now closes the connection."""
        self.reader = None
        self._waiter = None

    def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def abort(self) -> None:
        """Close at once (a cancelled or failed exchange's deadline is cancelled too)."""
        self._stop_timer()
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def _socket_poller(transport: asyncio.BaseTransport) -> select.poll | None:
    """A poll(2) set holding the transport's socket, made once per connection: asking it
    before each reuse is then one system call (a poll object per ask was ~4% of a
    burst's CPU). None when the transport has no socket to ask."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    poller = select.poll()
    try:
        poller.register(sock.fileno(), select.POLLIN)
    except (OSError, ValueError):
        return None
    return poller


def _bytes_waiting(poller: select.poll | None) -> bool:
    """Whether the socket has bytes (or an end of stream) not read yet; one poll(2).
    Asked only while the connection is open, so the descriptor is still this socket's."""
    if poller is None:
        return True  # a socket we cannot ask is not one to reuse
    try:
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


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
