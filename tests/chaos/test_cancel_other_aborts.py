"""overlap_policy cancel_other across two real replicas: once a newer occurrence's request
starts, the superseded request in flight is aborted (its connection closed) wherever it
runs, so the receiver sees at most one request of the schedule in flight after the switch,
and a run recorded ``cancelled`` was never answered 200.

The receiver is a raw loopback server in the test: it holds every request for longer than
the schedule's period, notes when the sender closed the connection before the answer, and
answers 200 only to a request still open at the end of its hold."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass
from datetime import timedelta

import asyncpg
import pytest

from cronwire.domain.model import OverlapPolicy
from cronwire.harness.seeding import non_terminal, seed_tenant, status_counts
from tests.chaos.test_scheduling_processes import create
from tests.support.polling import wait_until
from tests.support.replicas import ReplicaSet

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(300)]

PERIOD_SECONDS = 2  # the schedule fires every 2 s ...
HOLD_SECONDS = 5.0  # ... and the receiver holds each request 5 s: always overlapping
DELIVERY_TIMEOUT = 9.0  # never reached: leases of 18 s, renewed every 6 s
RENEWAL_INTERVAL = 2 * DELIVERY_TIMEOUT / 3
# How soon after the newer request arrives the older one must be closed: the executor
# checks its cancel_other requests every 0.5 s; the rest is a loaded shared machine's
# margin (a claim, a poll round trip, the receiver noticing the close). Well under the
# renewal interval, and under the hold, so a request left to finish fails it.
ABORT_BOUND = 2.5


@dataclass
class Exchange:
    run_id: str
    arrived: float
    ended: float | None = None
    answered: bool = False  # the receiver wrote its 200
    closed_by_sender: bool = False


class HoldingReceiver:
    """HTTP/1.1 on loopback, one exchange per connection it is given."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/hook"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                headers = dict(
                    line.split(":", 1) for line in head.decode("latin-1").split("\r\n")[1:] if ":" in line)
                headers = {k.strip().lower(): v.strip() for k, v in headers.items()}
                await reader.readexactly(int(headers.get("content-length", "0")))
                exchange = Exchange(headers.get("x-cronwire-run-id", "?"), time.monotonic())
                self.exchanges.append(exchange)
                try:
                    # EOF (or a reset) before the hold ends: the sender closed the connection.
                    data: bytes | None = await asyncio.wait_for(reader.read(1), HOLD_SECONDS)
                except TimeoutError:
                    data = None
                except ConnectionError:
                    data = b""
                exchange.ended = time.monotonic()
                if data == b"":
                    exchange.closed_by_sender = True
                    return
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
                exchange.answered = True
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    def in_flight_at(self, instant: float) -> int:
        return sum(1 for e in self.exchanges
                   if e.arrived <= instant and (e.ended is None or e.ended > instant))


@pytest.mark.parametrize("deliverer", ["lean", "httpx"])
async def test_cancel_other_aborts_the_superseded_request_on_whichever_replica_holds_it(
    db_pool: asyncpg.Pool, fleet: ReplicaSet, deliverer: str,
) -> None:
    receiver = HoldingReceiver()
    url = await receiver.start()
    try:
        async with db_pool.acquire() as conn:
            tenant = await seed_tenant(conn)
        # Both up before the first occurrence, with one delivery slot each: the replica
        # holding a request cannot claim the occurrence that supersedes it, so the other
        # one does, and every abort has to cross from one replica to the other. (With
        # free slots on both, which one claimed was a race: once in a full run, one
        # replica won all seven.)
        for name in ("a", "b"):
            await fleet.spawn(name, roles="planner,executor", delivery_timeout=DELIVERY_TIMEOUT,
                              executor_workers=1, deliverer=deliverer)
        now = await db_pool.fetchval("SELECT now()")
        starts, ends = now + timedelta(seconds=3), now + timedelta(seconds=17)
        schedule = await create(db_pool, tenant, url, cron=f"*/{PERIOD_SECONDS} * * * * *",
                                name="cancel-other", overlap_policy=OverlapPolicy.CANCEL_OTHER,
                                starts_at=starts, ends_at=ends)

        async def settled() -> bool:
            if await db_pool.fetchval("SELECT now()") < ends + timedelta(seconds=1):
                return False
            return await non_terminal(db_pool) == 0

        await wait_until(settled, within=90, every=0.5, saw=lambda: status_counts(db_pool))
    finally:
        await receiver.stop()
    rows = await db_pool.fetch(
        "SELECT r.id::text AS id, r.status, r.last_error, a.claimed_by FROM job_run r "
        "LEFT JOIN run_attempt a ON a.run_id = r.id WHERE r.schedule_id = $1 "
        "ORDER BY r.scheduled_for", schedule)
    status = {r["id"]: r["status"] for r in rows}
    holder = {r["id"]: r["claimed_by"] for r in rows}
    seen = sorted(receiver.exchanges, key=lambda e: e.arrived)
    figures = {
        "runs": len(rows), "requests": len(seen),
        "statuses": sorted(status.values()),
        "exchanges": [(e.run_id[:8], round(e.arrived - seen[0].arrived, 2),
                       None if e.ended is None else round(e.ended - e.arrived, 2),
                       e.answered, e.closed_by_sender, status.get(e.run_id), holder.get(e.run_id))
                      for e in seen],
    }
    print(f"cancel_other_{deliverer}: {json.dumps(figures, default=str)}")
    assert len(seen) >= 4, figures  # enough switches to have tested something

    # Each older request was closed within the bound of the newer one's arrival.
    late = [(older.run_id, round((older.ended or float("inf")) - newer.arrived, 2))
            for older, newer in itertools.pairwise(seen)
            if (older.ended or float("inf")) > newer.arrived + ABORT_BOUND]
    assert not late, f"superseded requests still open {ABORT_BOUND} s after the next: {late}; {figures}"
    # Sampled every 50 ms: past the bound after the latest arrival, one request in flight.
    most = 0
    instant = seen[0].arrived
    while instant < max(e.ended or instant for e in seen):
        latest = max(e.arrived for e in seen if e.arrived <= instant)
        if instant > latest + ABORT_BOUND:
            most = max(most, receiver.in_flight_at(instant))
        instant += 0.05
    assert most <= 1, figures
    # A run recorded cancelled was never answered 200; a run answered 200 is recorded so.
    answered = {e.run_id for e in seen if e.answered}
    cancelled = {run for run, s in status.items() if s == "cancelled"}
    assert not answered & cancelled, figures
    aborted = {e.run_id for e in seen if e.closed_by_sender}
    assert aborted and aborted <= cancelled, figures
    assert all(status[run] == "succeeded" for run in answered), figures
    assert {r["last_error"] for r in rows if r["id"] in aborted} == {
        "Cancelled: superseded by a newer occurrence (overlap_policy cancel_other); "
        "the request in flight was aborted (connection closed)"}, figures
    # The cancellation reached the other replica: with one slot each, every aborted
    # request's holder is not the holder of the request that superseded it.
    crossed = sum(1 for older, newer in itertools.pairwise(seen)
                  if older.run_id in aborted and holder.get(older.run_id) != holder.get(newer.run_id))
    print(f"cancel_other_{deliverer}: aborted={len(aborted)} across replicas={crossed}")
    assert crossed == len(aborted), figures
