"""An in-process TCP proxy between replicas and Postgres that misbehaves on request.

``drop`` closes a share of the open connections cleanly (FIN), ``reset`` aborts them
(RST), ``stall`` stops forwarding on every connection for a while without closing any
(what a congested or partitioned network looks like: the bytes are late, not lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct


class ChaosProxy:
    def __init__(self, upstream_host: str, upstream_port: int, rng: random.Random) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._rng = rng
        self._server: asyncio.Server | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.connections = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        self._flowing.set()
        if self._server is not None:
            self._server.close()
        for client, upstream in list(self._links):
            client.transport.abort()
            upstream.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

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
        self._flowing.clear()
        try:
            await asyncio.sleep(seconds)
        finally:
            self._flowing.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.transport.abort()
            return
        link = (writer, up_writer)
        self._links.add(link)
        self.connections += 1
        pipes = [asyncio.create_task(self._pipe(reader, up_writer)),
                 asyncio.create_task(self._pipe(up_reader, writer))]
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

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
