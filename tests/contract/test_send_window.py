"""The send window, for both deliverers: a request whose window closed while it waited for
a pool slot or a connection is not written at all (RequestNotSent), so a process stalled
in that wait cannot wake and send on a lease another replica has taken over (the chaos
suite's stall fault found one such late send; ADR 0022). httpx honours it too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from uuid import UUID

import pytest

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.domain.delivery import Outcome
from cronwire.domain.errors import RequestNotSent
from cronwire.service.signals import ExecutorSignals, Observed
from tests.support.deliverer_sink import ADAPTERS, Deliverer, make_request
from tests.support.executor_harness import running
from tests.support.memory_executor import Rig
from tests.support.polling import wait_until


@dataclass
class SlowReceiver:
    """Answers 200 after ``delay`` seconds; counts connections and requests it read."""

    delay: float = 0.5
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length")), b"0"))
                await reader.readexactly(length)
                self.requests.append(head.split(b"\r\n", 1)[0])
                await asyncio.sleep(self.delay)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@pytest.fixture
async def receiver() -> AsyncIterator[SlowReceiver]:
    found = SlowReceiver()
    server = await asyncio.start_server(found.handle, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    yield found
    server.close()
    await server.wait_closed()


@pytest.fixture(params=sorted(ADAPTERS))
async def one_connection(request: pytest.FixtureRequest) -> AsyncIterator[Deliverer]:
    deliverer = ADAPTERS[request.param](TargetGuard(allow_private=True), max_connections=1)
    await deliverer.start()
    yield deliverer
    await deliverer.close()


async def test_a_closed_window_writes_nothing(receiver: SlowReceiver,
                                              one_connection: Deliverer) -> None:
    url = f"http://127.0.0.1:{receiver.port}/hook"
    with pytest.raises(RequestNotSent):
        await one_connection.deliver(make_request(url, send_by_monotonic=time.monotonic() - 0.001))
    await asyncio.sleep(0.1)  # anything written would have been read by now
    assert receiver.requests == []
    # The connection it opened carried nothing, so the next request can use it (lean; httpx
    # opens a connection per attempt).
    assert (await one_connection.deliver(make_request(url))).outcome is Outcome.SUCCESS
    assert len(receiver.requests) == 1
    assert receiver.connections == (1 if isinstance(one_connection, LeanDeliverer) else 2)


async def test_a_window_that_closes_while_waiting_for_a_slot_is_not_sent(
    receiver: SlowReceiver, one_connection: Deliverer
) -> None:
    url = f"http://127.0.0.1:{receiver.port}/hook"
    first = asyncio.create_task(one_connection.deliver(make_request(url)))
    # Wait until the only slot is busy (for receiver.delay seconds) with the first request.
    await wait_until(lambda: bool(receiver.requests), within=5)
    with pytest.raises(RequestNotSent):
        await one_connection.deliver(make_request(url, send_by_monotonic=time.monotonic() + 0.1))
    assert (await first).outcome is Outcome.SUCCESS
    assert len(receiver.requests) == 1
    # A window long enough to outlast the wait is sent as usual.
    later = make_request(url, send_by_monotonic=time.monotonic() + 30.0)
    assert (await one_connection.deliver(later)).outcome is Outcome.SUCCESS
    assert len(receiver.requests) == 2


class StopOnce(Observed[UUID]):
    """The executor's "request about to leave" signal, which it records between its send
    check and the call of the deliverer: the first time, the whole process stops there
    (a blocking sleep holds the event loop, as SIGSTOP holds the process)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self._seconds = seconds

    def add(self, items: Iterable[UUID]) -> None:
        if not self.items:
            time.sleep(self._seconds)
        super().add(items)


async def test_a_stop_between_the_executors_check_and_the_deliverer_sends_nothing(
    receiver: SlowReceiver,
) -> None:
    # The chaos stall fault's one late send (ADR 0022): the deadline used to be a duration
    # that the deliverer turned into an instant only when entered, so a stop just before
    # that moved it on by the stop. A 2 s stop with a 3 s lease leaves 1 s: less than half
    # the lease, so the request must not leave; it is given back and delivered once later.
    receiver.delay = 0.0
    rig = Rig(signals=ExecutorSignals(started=StopOnce(2.0)))
    lean = LeanDeliverer(TargetGuard(allow_private=True), monotonic=rig.db.clock.monotonic)
    await lean.start()
    rig.deliverer = lean  # type: ignore[assignment]
    rig.seed(1, url=f"http://127.0.0.1:{receiver.port}/hook")
    try:
        async with running(rig.executor(lease_seconds=3.0)):
            await rig.signals.settled.wait_count(1, within=20)
    finally:
        await lean.close()
    [run] = rig.db.runs.values()
    assert rig.signals.abandoned.items == [run.id]  # the stopped request: given back unsent
    assert len(receiver.requests) == 1  # only the later claim's
    assert rig.statuses() == {"succeeded": 1}
    assert [attempt for _, attempt, _ in rig.db.attempts] == [1]


class StopAtTheWrite:
    """A monotonic clock that jumps ``seconds`` ahead from its ``at``-th reading on, as if
    the process had been stopped right there."""

    def __init__(self, at: int, seconds: float) -> None:
        self.readings = 0
        self._at = at
        self._seconds = seconds

    def __call__(self) -> float:
        self.readings += 1
        return time.monotonic() + (self._seconds if self.readings >= self._at else 0.0)


async def test_the_window_is_read_last_and_a_stop_after_that_reading_is_counted(
    receiver: SlowReceiver,
) -> None:
    # The lean deliverer reads its clock for the window as the last step before the write,
    # and once more right after it. A stop after the first reading cannot be caught (the
    # process writes once it wakes), but it is seen: counted, logged and reported.
    late: list[None] = []
    clock = StopAtTheWrite(at=2, seconds=10.0)
    deliverer = LeanDeliverer(TargetGuard(allow_private=True), monotonic=clock,
                              on_late_send=lambda: late.append(None))
    await deliverer.start()
    try:
        url = f"http://127.0.0.1:{receiver.port}/hook"
        request = make_request(url, send_by_monotonic=time.monotonic() + 5.0)
        assert (await deliverer.deliver(request)).outcome is Outcome.SUCCESS
        assert clock.readings == 2 and len(receiver.requests) == 1
        assert deliverer.stats.late_sends == 1 and len(late) == 1
        # The same stop one reading earlier (before the write) sends nothing and counts
        # nothing; the unused connection is kept for the next request.
        clock = StopAtTheWrite(at=1, seconds=10.0)
        deliverer._monotonic = clock
        with pytest.raises(RequestNotSent):
            await deliverer.deliver(make_request(url, send_by_monotonic=time.monotonic() + 5.0))
        assert clock.readings == 1 and len(receiver.requests) == 1
        assert deliverer.stats.late_sends == 1 and deliverer.stats.connects == 1
        deliverer._monotonic = time.monotonic
        assert (await deliverer.deliver(make_request(url))).outcome is Outcome.SUCCESS
        assert deliverer.stats.connects == 1 and len(receiver.requests) == 2
    finally:
        await deliverer.close()
