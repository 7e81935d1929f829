"""One webhook receiver on loopback for every harness: in a test's own event loop, and as
a process of its own for `cronwire loadtest` and `cronwire chaos` (sink_process.py).

Each request is an :class:`Arrival`. How the sink answers is a ``Behaviour``: a function
of the arrival returning a :class:`Reply` (status, delay, headers, ``Retry-After``, or
``hold``: wait on an event before answering). A 2xx answer acknowledges the arrival's
``webhook-id``; ``duplicates`` counts 2xx answers for an id already acknowledged, the
number receivers must dedupe. Tests await conditions with :meth:`Sink.wait_for`; nothing
sleeps. ``GET /_stats`` answers :meth:`Sink.stats`; :meth:`Sink.dump` writes one JSON
line per acknowledgement, the records the load test and chaos reports count from.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from cronwire.harness.stats import instant_seconds, percentile

_NO_HEADERS: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict())


@dataclass(frozen=True, slots=True)
class Reply:
    status: int = 200
    delay: float = 0.0
    retry_after: str | None = None
    hold: asyncio.Event | None = None
    hold_seconds: float | None = None  # answer anyway after this long on hold
    on_cancel: Callable[[], None] | None = None  # the client hung up before the answer
    body: bytes = b"ok"
    headers: Mapping[str, str] | None = None


@dataclass(slots=True)
class Arrival:
    webhook_id: str
    attempt: int
    run_id: str
    scheduled_for: str
    method: str
    path_qs: str
    headers: CIMultiDictProxy[str] | CIMultiDict[str]
    body: bytes
    arrived_at: float  # time.monotonic()
    started: float  # time.time(), for records other processes compare with their clock
    status: int | None = None  # what was answered; None while held or if never answered
    answered_at: float | None = None  # time.monotonic()
    at: float | None = None  # time.time() of the answer

    @property
    def path(self) -> str:
        return self.path_qs.partition("?")[0]

    def record(self) -> dict[str, Any]:
        return {"id": self.webhook_id, "run_id": self.run_id,
                "scheduled_for": self.scheduled_for, "attempt": self.attempt,
                "started": self.started, "at": self.at}


Behaviour = Callable[[Arrival], Reply]


def always(reply: Reply) -> Behaviour:
    return lambda _arrival: reply


def by_attempt(replies: Mapping[int, Reply], default: Reply | None = None) -> Behaviour:
    """Answer attempt N with ``replies[N]`` (else ``default``, else 200)."""
    fallback = default or Reply()
    return lambda arrival: replies.get(arrival.attempt, fallback)


@dataclass
class Sink:
    behaviour: Behaviour = field(default_factory=lambda: always(Reply()))
    host: str = "127.0.0.1"
    port: int = 0
    # Keep each request's headers and body (tests look at them); a load test's sink keeps
    # only what its records need.
    keep_requests: bool = True
    # Cancel a held answer when its client hangs up (Reply.on_cancel is then called).
    cancel_on_disconnect: bool = False
    arrivals: list[Arrival] = field(default_factory=list)
    acknowledged: set[str] = field(default_factory=set)
    received: int = 0  # 2xx answers
    duplicates: int = 0
    failed: int = 0  # other answers
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None
    _reported: int = 0  # arrivals already covered by a /_stats lag figure

    def url_for(self, path: str = "/hook") -> str:
        return f"http://{self.host}:{self.port}{path}"

    @property
    def url(self) -> str:
        return self.url_for("/hook")

    async def start(self) -> Sink:
        app = web.Application()
        app.router.add_get("/_stats", self._stats)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A held request must not keep a finished test waiting for the default 60 s.
        self._runner = web.AppRunner(app, access_log=None,
                                     handler_cancellation=self.cancel_on_disconnect,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port, backlog=4096).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Sink:
        return await self.start()

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()

    def for_id(self, webhook_id: str) -> list[Arrival]:
        return [a for a in self.arrivals if a.webhook_id == webhook_id]

    @property
    def unique(self) -> int:
        return len(self.acknowledged)

    async def wait_for(self, predicate: Callable[[Sink], bool], within: float) -> None:
        """Return once ``predicate(self)`` holds; after ``within`` seconds a TimeoutError
        that says what the sink had seen by then (a failure under load must say how far
        it got, not only that it ran out of time)."""
        try:
            async with asyncio.timeout(within):
                while not predicate(self):
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise TimeoutError(
                f"sink: condition not met within {within:g}s; saw {self.unique} unique runs "
                f"acknowledged in {len(self.arrivals)} requests ({self.duplicates} duplicates, "
                f"{self.failed} failed answers)") from None

    def stats(self) -> dict[str, Any]:
        """Counts so far, and the p99 lag of the acknowledgements since the last call."""
        return {"requests": len(self.arrivals), "received": self.received,
                "unique": self.unique, "duplicates": self.duplicates, "failed": self.failed,
                "lag_p99_ms": self._recent_lag_p99_ms()}

    def dump(self, path: Path) -> None:
        """One JSON line per acknowledgement (:meth:`Arrival.record`)."""
        with path.open("w", encoding="utf-8") as out:
            for arrival in self.arrivals:
                if arrival.status is not None and 200 <= arrival.status <= 299:
                    out.write(json.dumps(arrival.record()))
                    out.write("\n")

    def _notify(self) -> None:
        self._changed.set()

    def _recent_lag_p99_ms(self) -> float | None:
        recent = self.arrivals[self._reported:]
        self._reported = len(self.arrivals)
        lags = [arrival.at - instant for arrival in recent
                if arrival.at is not None and arrival.status is not None
                and 200 <= arrival.status <= 299
                and (instant := instant_seconds(arrival.scheduled_for)) is not None]
        if not lags:
            return None
        return round(percentile(lags, 0.99) * 1000, 1)

    async def _stats(self, _request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _handle(self, request: web.Request) -> web.Response:
        started = time.time()
        body = await request.read()
        headers = request.headers
        attempt = headers.get("x-cronwire-attempt", "0")
        arrival = Arrival(
            webhook_id=headers.get("webhook-id", ""),
            attempt=int(attempt) if attempt.isdigit() else 0,
            run_id=headers.get("x-cronwire-run-id", ""),
            scheduled_for=headers.get("x-cronwire-scheduled-for", ""),
            method=request.method,
            path_qs=request.path_qs,
            headers=CIMultiDict(headers) if self.keep_requests else _NO_HEADERS,
            body=body if self.keep_requests else b"",
            arrived_at=time.monotonic(),
            started=started,
        )
        self.arrivals.append(arrival)
        self._notify()
        reply = self.behaviour(arrival)
        try:
            if reply.hold is not None:
                with contextlib.suppress(TimeoutError):  # held long enough: answer now
                    async with asyncio.timeout(reply.hold_seconds):
                        await reply.hold.wait()
            if reply.delay:
                await asyncio.sleep(reply.delay)  # a slow receiver is the behaviour under test
        except asyncio.CancelledError:
            if reply.on_cancel is not None:
                reply.on_cancel()
            raise
        if 200 <= reply.status <= 299:
            self.received += 1
            if arrival.webhook_id in self.acknowledged:
                self.duplicates += 1
            self.acknowledged.add(arrival.webhook_id)
        else:
            self.failed += 1
        arrival.status = reply.status
        arrival.answered_at, arrival.at = time.monotonic(), time.time()
        self._notify()
        answer = dict(reply.headers or {})
        if reply.retry_after:
            answer["retry-after"] = reply.retry_after
        return web.Response(status=reply.status, body=reply.body, headers=answer or None)
