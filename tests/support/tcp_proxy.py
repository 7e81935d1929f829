"""A loopback TCP proxy that a test can cut, for database outages without stopping the
shared test server.

``cut()`` closes every connection through the proxy and refuses new ones (the listening
socket is closed), which is what clients see of a Postgres restart; ``restore()`` listens
on the same port again. Everything runs on the test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    @classmethod
    def for_dsn(cls, dsn: str) -> TcpProxy:
        """A proxy for the server of ``dsn`` (:meth:`dsn` gives the DSN through it)."""
        parts = urlsplit(dsn)
        return cls(parts.hostname or "127.0.0.1", parts.port or 5432)

    def dsn(self, dsn: str) -> str:
        """``dsn`` pointed at this proxy (after :meth:`start`)."""
        parts = urlsplit(dsn)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{self.port}"))

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def cut(self) -> None:
        """Drop every connection and stop listening: connects are refused until restore."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def restore(self) -> None:
        await self.start()

    async def close(self) -> None:
        await self.cut()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer)),
        ]
        self._pipes.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pipes:
                task.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            self._pipes.difference_update(pipes)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
