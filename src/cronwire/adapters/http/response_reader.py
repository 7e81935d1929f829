"""The answer to one HTTP/1.1 request, parsed by llhttp (through ``httptools``, the
parser behind Node.js and uvicorn) as the bytes arrive, under the hard limits of
``limits.py`` (ADR 0026). Each arrival is fed to the parser once and dropped: nothing is
buffered, nothing is scanned twice."""

from __future__ import annotations

import httptools

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
