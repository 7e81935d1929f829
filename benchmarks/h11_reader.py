"""The lean deliverer's response reader written over h11 instead of llhttp: the candidate
ADR 0026 measured and did not keep. Same interface as ``response_reader.ResponseReader`` and the
same limits (h11 enforces the head size itself), so ``bench_http_clients.py --adapters
lean-h11`` runs the real LeanDeliverer with it in place of llhttp.
"""

from __future__ import annotations

import h11

from cronwire.adapters.http.limits import (
    MAX_BODY_BYTES,
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    MAX_INTERIM,
    MAX_RESPONSE_BYTES,
)
from cronwire.adapters.http.response_reader import Answer, ProtocolError
from cronwire.domain.delivery import EXCERPT_BYTES


class H11ResponseReader:
    def __init__(self, method: str) -> None:
        self.begin(method)

    def begin(self, method: str) -> None:
        self._conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        # h11 must see the request to know how the answer is framed (HEAD, for one).
        self._conn.send(h11.Request(method=method, target="/", headers=[("Host", "x"),
                                                                       ("Content-Length", "0")]))
        self._conn.send(h11.EndOfMessage())
        self.answer: Answer | None = None
        self.done = False
        self.reusable = False
        self.received = 0
        self._interim = 0
        self._body_bytes = 0

    def feed(self, data: bytes) -> None:
        if self.done:
            self.reusable = False
            return
        self.received += len(data)
        self._conn.receive_data(data)
        self._events()
        if not self.done and self.received > MAX_RESPONSE_BYTES:
            self.cut()

    def eof(self) -> None:
        if self.done:
            return
        if self.answer is None:
            raise ConnectionResetError("the receiver closed the connection without answering")
        self.cut()

    def cut(self) -> None:
        self.done = True
        self.reusable = False

    def _events(self) -> None:
        conn = self._conn
        while not self.done:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise ProtocolError(f"malformed response: {exc}") from None
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.InformationalResponse):
                self._interim += 1
                if self._interim > MAX_INTERIM or event.status_code == 101:
                    raise ProtocolError("too many interim answers")
            elif isinstance(event, h11.Response):
                if event.status_code > 599 or len(event.headers) > MAX_HEADERS:
                    raise ProtocolError("status outside 100-599 or too many headers")
                headers: dict[bytes, bytes] = {}
                for name, value in event.headers:
                    headers.setdefault(name, value)
                keep = event.http_version == b"1.1" and b"close" not in headers.get(
                    b"connection", b"").lower()
                self.answer = Answer(event.status_code, event.reason.decode("latin-1"),
                                     headers, keep)
            elif isinstance(event, h11.Data):
                assert self.answer is not None
                self._body_bytes += len(event.data)
                room = EXCERPT_BYTES - len(self.answer.body)
                if room > 0:
                    self.answer.body += event.data[:room]
                if self._body_bytes > MAX_BODY_BYTES:
                    self.cut()
            elif isinstance(event, h11.EndOfMessage):
                assert self.answer is not None
                self.done = True
                trailing, closed = conn.trailing_data
                self.reusable = self.answer.keep_alive and not trailing and not closed
            elif isinstance(event, h11.ConnectionClosed):
                self.cut()
