"""A probe of the broker cancelled half-way leaves no connection behind.

A clean stop of a kafka-mode replica under load once logged `Unclosed AIOKafkaConnection`
at ERROR: the link's probe was cancelled while aiokafka's ``bootstrap()`` waited for its
metadata answer, and that bootstrap connection (a local of ``bootstrap()``, in no pool
that ``close()`` empties) was left to the garbage collector, which reports it through the
loop's exception handler. Here the broker's answers stop after the first one (the
connection's version lookup), the probe is cancelled while its metadata request waits,
and the loop must have been told of no unclosed connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cronwire.adapters.kafka.capabilities import grants_producer_ids
from cronwire.adapters.kafka.metadata import MetadataProbe


class AnswersOnce:
    """A loopback TCP relay to a broker that forwards every request but only the first
    answer of each connection (Kafka frames: a 4-byte length, then the frame)."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.split(",")[0].rpartition(":")
        self._upstream = (host, int(port))
        self.second_request = asyncio.Event()  # a request after the version lookup went up
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        pipes = [asyncio.create_task(self._frames(reader, up_writer, forward=None)),
                 asyncio.create_task(self._frames(up_reader, writer, forward=1))]
        self._tasks.update(pipes)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait(pipes)
        for w in (writer, up_writer):
            w.transport.abort()

    async def _frames(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      forward: int | None) -> None:
        count = 0
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readexactly(4)
                frame = await reader.readexactly(int.from_bytes(head, "big"))
                count += 1
                if forward is not None and count > forward:
                    continue  # held: the client hears nothing more
                writer.write(head + frame)
                await writer.drain()
                if forward is None and count >= 2:
                    self.second_request.set()


@pytest.fixture
async def relay(tansu_bootstrap: str) -> AsyncIterator[tuple[AnswersOnce, str]]:
    relay = AnswersOnce(tansu_bootstrap)
    address = await relay.start()
    try:
        yield relay, address
    finally:
        await relay.close()


def _unclosed_reports() -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reports.append(context))
    return reports


async def _cancel_once_asked(relay: AnswersOnce, probe: Any) -> None:
    task = asyncio.ensure_future(probe)
    await asyncio.wait_for(relay.second_request.wait(), 20)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    await asyncio.sleep(0.1)  # the reader task the connection started ends
    gc.collect()


async def test_a_metadata_probe_cancelled_while_it_waits_leaves_no_connection(
    relay: tuple[AnswersOnce, str],
) -> None:
    reports = _unclosed_reports()
    proxy, address = relay
    await _cancel_once_asked(proxy, MetadataProbe(address, 10_000).fetch())
    messages = [str(context.get("message")) for context in reports]
    assert not any("Unclosed AIOKafkaConnection" in m for m in messages), messages


async def test_a_producer_id_probe_cancelled_while_it_waits_leaves_no_connection(
    relay: tuple[AnswersOnce, str],
) -> None:
    reports = _unclosed_reports()
    proxy, address = relay
    await _cancel_once_asked(
        proxy, grants_producer_ids(address, within=30, request_timeout_ms=10_000))
    messages = [str(context.get("message")) for context in reports]
    assert not any("Unclosed AIOKafkaConnection" in m for m in messages), messages
