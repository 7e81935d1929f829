"""An in-process TCP proxy between clients and Postgres that misbehaves on request.

The one proxy of the project: `cronwire chaos` puts it between replicas and Postgres, and
the integration tests (through ``tests/support/tcp_proxy.py``) between an executor and
the shared test server.

``drop`` closes a share of the open connections cleanly (FIN), ``reset`` aborts them
(RST), ``stall`` stops forwarding on every connection for a while without closing any
(what a congested or partitioned network looks like: the bytes are late, not lost), and
``blackhole`` does the same until ``release``, new connections included (or holds only
the server's answers: a half-open partition). ``cut`` drops
every connection and stops listening, which is what clients see of a Postgres restart;
``restore`` listens on the same port again. Everything runs on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import socket
import struct
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

# asyncpg's prepared statements: the SQL text is sent once (Parse), later runs name it.
_STATEMENT_NAME = re.compile(rb"__asyncpg_stmt_[0-9A-Za-z]+__")


class ChaosProxy:
    def __init__(self, upstream_host: str, upstream_port: int,
                 rng: random.Random | None = None) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._rng = rng or random.Random(0)
        self._server: asyncio.Server | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._flowing = asyncio.Event()  # client -> upstream
        self._flowing.set()
        self._answering = asyncio.Event()  # upstream -> client
        self._answering.set()
        self._tasks: set[asyncio.Task[None]] = set()  # the pipes
        self._handlers: set[asyncio.Task[None]] = set()  # one per accepted connection
        self._cuts = 0
        self._marker: bytes | None = None
        self._armed = False
        self._triggered = asyncio.Event()
        self.port = 0
        self.connections = 0

    @classmethod
    def for_dsn(cls, dsn: str, rng: random.Random | None = None) -> ChaosProxy:
        """A proxy for the server of ``dsn`` (:meth:`dsn` gives the DSN through it)."""
        parts = urlsplit(dsn)
        return cls(parts.hostname or "127.0.0.1", parts.port or 5432, rng)

    def dsn(self, dsn: str) -> str:
        """``dsn`` pointed at this proxy (after :meth:`start`)."""
        parts = urlsplit(dsn)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{self.port}"))

    async def start(self) -> ChaosProxy:
        """Listen on loopback (on :attr:`port` again after a :meth:`cut`)."""
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def cut(self) -> None:
        """Drop every connection and stop listening: connects are refused until restore.
        Returns once every accepted connection's handler has ended and every socket it
        had is closed: an abort closes its socket only in a later loop callback, which a
        loop closed right after us would never run (the socket then leaks, and its
        ResourceWarning surfaces wherever the garbage collector happens to run)."""
        server, self._server = self._server, None
        self._cuts += 1
        if server is not None:
            server.close()
        for client, upstream in list(self._links):
            client.transport.abort()
            upstream.transport.abort()
        for task in list(self._tasks) + list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._tasks, *self._handlers, return_exceptions=True)
        if server is not None:
            await server.wait_closed()
        await asyncio.sleep(0)  # the aborts' connection_lost callbacks close the sockets

    async def restore(self) -> None:
        await self.start()

    async def close(self) -> None:
        self.release()
        await self.cut()

    def open_links(self) -> int:
        return len(self._links)

    def drop(self, share: float) -> int:
        """Close about ``share`` of the connections with a FIN; returns how many."""
        chosen = [link for link in list(self._links) if self._rng.random() < share]
        for client, upstream in chosen:
            client.close()
            upstream.close()
        return len(chosen)

    def reset(self, share: float) -> int:
        """Abort about ``share`` of the connections with an RST; returns how many."""
        chosen = [link for link in list(self._links) if self._rng.random() < share]
        for client, upstream in chosen:
            for writer in (client, upstream):
                sock = writer.get_extra_info("socket")
                if sock is not None:  # linger 0: close() sends RST instead of FIN
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
                writer.transport.abort()
        return len(chosen)

    async def stall(self, seconds: float) -> None:
        """Hold every byte in both directions for ``seconds``."""
        self.blackhole()
        try:
            await asyncio.sleep(seconds)
        finally:
            self.release()

    def blackhole(self, *, answers_only: bool = False) -> None:
        """Hold every byte in both directions, on open and new connections, until
        :meth:`release`. Nothing is closed: the peers only see silence. With
        ``answers_only`` the client's bytes still reach the server (its statements run
        and commit) and only the answers are held: a half-open partition."""
        if not answers_only:
            self._flowing.clear()
        self._answering.clear()

    def watch(self, marker: bytes) -> None:
        """Recognise the statement whose SQL contains ``marker`` (set before the clients
        connect: a prepared statement's text crosses the wire only once)."""
        self._marker = marker

    def blackhole_after_watched(self) -> asyncio.Event:
        """:meth:`blackhole` right after the next run of the watched statement has been
        forwarded: it reaches the server and runs, its answer is held. The event is set
        when that happened."""
        self._triggered.clear()
        self._armed = True
        return self._triggered

    def release(self) -> None:
        self._flowing.set()
        self._answering.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        try:
            await self._link(reader, writer)
        finally:
            self._handlers.discard(handler)
            writer.transport.abort()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward between the client and a new upstream connection until either ends
        (the caller aborts the client's side)."""
        # A connection accepted just before a cut must not outlive it: it was not yet in
        # the links the cut closed.
        cuts = self._cuts
        if self._server is None:
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            return
        if self._cuts != cuts:
            up_writer.transport.abort()
            return
        link = (writer, up_writer)
        self._links.add(link)
        self.connections += 1
        pipes = [asyncio.create_task(self._pipe(reader, up_writer, self._flowing, self._seen)),
                 asyncio.create_task(self._pipe(up_reader, writer, self._answering))]
        self._tasks.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pipes:
                task.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            self._tasks.difference_update(pipes)
            self._links.discard(link)
            for w in link:
                w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    gate: asyncio.Event,
                    seen: Callable[[bytes, set[bytes]], None] | None = None) -> None:
        names: set[bytes] = set()  # this connection's names of the watched statement
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                await gate.wait()
                writer.write(data)
                await writer.drain()
                if seen is not None:
                    seen(data, names)

    def _seen(self, data: bytes, names: set[bytes]) -> None:
        """Client bytes just forwarded: if they run the watched statement, cut now."""
        if self._marker is None:
            return
        hit = self._marker in data
        if hit:
            names.update(_STATEMENT_NAME.findall(data))
        elif names:
            hit = any(name in data for name in names)
        if hit and self._armed:
            self._armed = False
            self.blackhole()
            self._triggered.set()
