"""The chaos TCP proxy against a loopback echo server: it forwards, a blackhole holds bytes
without closing anything (new connections included) until released, a cut refuses
connections until restore listens on the same port again, and close leaves nothing
running. Every test closes its own connections and waits until they are closed: a
socket left to the garbage collector warns in whichever later test the collector runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from cronwire.chaos.proxy import ChaosProxy


@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(1024):
                writer.write(data)
                await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


async def _closed(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


async def _roundtrip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     data: bytes, within: float = 5.0) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), within)


async def test_a_blackhole_holds_bytes_without_closing_until_released() -> None:
    async with echo_server() as port:
        proxy = await ChaosProxy("127.0.0.1", port).start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            assert await _roundtrip(reader, writer, b"ping") == b"ping"
            proxy.blackhole()
            with pytest.raises(TimeoutError):
                await _roundtrip(reader, writer, b"held", within=0.3)
            late_reader, late_writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            with pytest.raises(TimeoutError):  # a new connection is just as silent
                await _roundtrip(late_reader, late_writer, b"new", within=0.3)
            assert proxy.open_links() == 2  # nothing was closed
            proxy.release()
            assert await asyncio.wait_for(reader.readexactly(4), 5) == b"held"
            assert await asyncio.wait_for(late_reader.readexactly(3), 5) == b"new"
            for w in (writer, late_writer):
                await _closed(w)
        finally:
            await proxy.close()


async def test_a_cut_refuses_connections_until_restored_on_the_same_port() -> None:
    async with echo_server() as port:
        proxy = await ChaosProxy.for_dsn(f"postgresql://u:p@127.0.0.1:{port}/db").start()
        try:
            assert proxy.dsn("postgresql://u:p@127.0.0.1:5432/db") == (
                f"postgresql://u:p@127.0.0.1:{proxy.port}/db")
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            assert await _roundtrip(reader, writer, b"up") == b"up"
            await proxy.cut()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the cut
            await _closed(writer)
            with pytest.raises(OSError):
                await asyncio.open_connection("127.0.0.1", proxy.port)
            listened_on = proxy.port
            await proxy.restore()
            assert proxy.port == listened_on
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            assert await _roundtrip(reader, writer, b"back") == b"back"
            await _closed(writer)
        finally:
            await proxy.close()


async def test_a_half_open_blackhole_lets_requests_through_and_holds_the_answers() -> None:
    received: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read(1024)
        received.append(data)
        writer.write(data)
        await writer.drain()
        await reader.read()  # until the client hangs up
        await _closed(writer)

    server = await asyncio.start_server(record, "127.0.0.1", 0)
    proxy = await ChaosProxy("127.0.0.1", int(server.sockets[0].getsockname()[1])).start()
    try:
        proxy.blackhole(answers_only=True)
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        with pytest.raises(TimeoutError):
            await _roundtrip(reader, writer, b"claim", within=0.5)
        assert received == [b"claim"]  # the statement ran; its answer is held
        proxy.release()
        assert await asyncio.wait_for(reader.readexactly(5), 5) == b"claim"
        await _closed(writer)
    finally:
        await proxy.close()
        server.close()
        await server.wait_closed()


async def test_close_returns_once_every_connection_it_accepted_is_closed() -> None:
    """close() used to return with the accepted connections' handlers still running: the
    proxy's sockets were closed only by loop callbacks after it returned, and a loop
    closed right then (the end of a test, of `cronwire chaos`) left them to the garbage
    collector, whose ResourceWarning failed an unrelated later test in CI."""
    async with echo_server() as port:
        proxy = await ChaosProxy("127.0.0.1", port).start()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await _roundtrip(reader, writer, b"up") == b"up"
        _late_reader, late_writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        await proxy.close()
        running = [task for task in asyncio.all_tasks() if not task.done()
                   and task.get_coro().__qualname__.startswith("ChaosProxy.")]
        assert running == []
        assert await asyncio.wait_for(reader.read(), 5) == b""
        for w in (writer, late_writer):
            await _closed(w)
