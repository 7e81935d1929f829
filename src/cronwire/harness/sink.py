"""A webhook receiver on loopback that records what arrives, for executor tests.

Each request is recorded as an :class:`Arrival` (``webhook-id``, attempt header, run id,
arrival time, the status answered). How the sink answers is a ``behaviour``: a function
of the arrival returning a :class:`Reply` (status, delay, ``Retry-After``, or ``hold``:
wait on an event before answering). ``duplicates`` counts 2xx answers for a
``webhook-id`` that had already been acknowledged with a 2xx, the number receivers must
dedupe. Tests await conditions with :meth:`Sink.wait_for`; nothing sleeps.

Also runnable as a process (``python -m cronwire.harness.sink --port 0``): prints
``{"port": N}`` on its first stdout line, answers 200 to every request, and serves
``GET /stats`` with ``{"requests", "unique", "duplicates"}``; stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web


@dataclass(frozen=True, slots=True)
class Reply:
    status: int = 200
    delay: float = 0.0
    retry_after: str | None = None
    hold: asyncio.Event | None = None
    body: bytes = b"ok"


@dataclass(slots=True)
class Arrival:
    webhook_id: str
    attempt: int
    run_id: str
    arrived_at: float  # time.monotonic()
    headers: Mapping[str, str]
    body: bytes
    status: int | None = None  # what was answered; None while held or if never answered
    answered_at: float | None = None


Behaviour = Callable[[Arrival], Reply]


def always(reply: Reply) -> Behaviour:
    return lambda _arrival: reply


def by_attempt(replies: Mapping[int, Reply], default: Reply | None = None) -> Behaviour:
    """Answer attempt N with ``replies[N]`` (else ``default``, else 200)."""
    fallback = default or Reply()
    return lambda arrival: replies.get(arrival.attempt, fallback)


def unused_port() -> int:
    """A loopback port nothing listens on (for 'connection refused' targets)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Sink:
    behaviour: Behaviour = field(default_factory=lambda: always(Reply()))
    arrivals: list[Arrival] = field(default_factory=list)
    acknowledged: set[str] = field(default_factory=set)
    duplicates: int = 0
    port: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def start(self) -> Sink:
        app = web.Application()
        app.router.add_route("*", "/hook", self._handle)
        app.router.add_get("/stats", self._stats)
        # A held request must not keep a finished test waiting for the default 60 s.
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, backlog=1024)
        await site.start()
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
        """Return once ``predicate(self)`` holds; TimeoutError after ``within`` seconds."""
        async with asyncio.timeout(within):
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()

    async def _handle(self, request: web.Request) -> web.Response:
        arrival = Arrival(
            webhook_id=request.headers.get("webhook-id", ""),
            attempt=int(request.headers.get("x-cronwire-attempt", "0") or 0),
            run_id=request.headers.get("x-cronwire-run-id", ""),
            arrived_at=time.monotonic(),
            headers=dict(request.headers),
            body=await request.read(),
        )
        self.arrivals.append(arrival)
        self._notify()
        reply = self.behaviour(arrival)
        if reply.hold is not None:
            await reply.hold.wait()
        if reply.delay:
            await asyncio.sleep(reply.delay)  # the receiver being slow is the behaviour under test
        if 200 <= reply.status <= 299:
            if arrival.webhook_id in self.acknowledged:
                self.duplicates += 1
            self.acknowledged.add(arrival.webhook_id)
        arrival.status = reply.status
        arrival.answered_at = time.monotonic()
        self._notify()
        headers = {"retry-after": reply.retry_after} if reply.retry_after else None
        return web.Response(status=reply.status, body=reply.body, headers=headers)

    async def _stats(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {"requests": len(self.arrivals), "unique": self.unique, "duplicates": self.duplicates}
        )


async def _serve(port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sink = Sink(port=port)
    async with sink:
        print(json.dumps({"port": sink.port}), flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="a recording webhook sink on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(_serve(args.port))
    except ImportError:
        asyncio.run(_serve(args.port))


if __name__ == "__main__":
    main()
