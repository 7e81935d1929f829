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
import zlib
from collections.abc import Callable

from yarl import URL

from cronwire.adapters.http.response_reader import Answer, ResponseReader
from cronwire.domain.delivery import EXCERPT_BYTES
from cronwire.domain.netpolicy import DEFAULT_PORTS


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
        """Open, its last exchange (if any) ended in a complete, reusable answer, and no
        byte waits unread in the kernel: bytes the loop has not handed to
        :meth:`data_received` yet (a surplus answer sent right after the last one) would
        otherwise be read as the next request's answer."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        reader = self.reader
        if reader is not None and not (reader.done and reader.reusable):
            return False
        return not _bytes_waiting(transport)

    def park(self) -> None:
        """Between requests: a byte arriving now closes the connection."""
        self.reader = None
        self._waiter = None

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def _bytes_waiting(transport: asyncio.Transport) -> bool:
    """Whether the socket has bytes (or an end of stream) not read yet; one poll(2)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    poller = select.poll()
    try:
        poller.register(sock.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True  # a socket we cannot ask is not one to reuse


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
