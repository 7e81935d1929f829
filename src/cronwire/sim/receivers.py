"""Simulated receivers and the fake Deliverer that reaches them (no sockets).

Each request is answered by its schedule's receiver as the scenario says: a quick 200, a
500, a 429 with Retry-After, no answer at all (the deliverer times out), or a 200 after
the request's deadline (the deliverer has timed out by then; the receiver thinks it
delivered). What a receiver does with one request is drawn from the seed, the run, the
attempt and the replica, not from a shared stream, so dropping a fault while shrinking
leaves every other answer as it was.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import timedelta

from cronwire.domain.delivery import DeliveryRequest, DeliveryResult, Outcome
from cronwire.domain.errors import RequestNotSent
from cronwire.ports import Clock
from cronwire.sim.checker import Checker, Exchange
from cronwire.sim.database import SimDatabase
from cronwire.sim.faults import FaultState, Life, park
from cronwire.sim.scenario import Receiver
from cronwire.sim.trace import Trace, short


class Receivers:
    def __init__(self, seed: int, db: SimDatabase, checker: Checker, trace: Trace,
                 receivers: dict[uuid.UUID, Receiver]) -> None:
        self._seed = seed
        self._db = db
        self._checker = checker
        self._trace = trace
        self._receivers = receivers  # by schedule id

    def answer(self, request: DeliveryRequest, life: Life) -> tuple[Exchange, float]:
        """The exchange this request starts, and when (seconds from now) the receiver
        answers it (inf: never)."""
        kind = self._receivers.get(request.schedule_id, Receiver())
        rng = random.Random(f"{self._seed}/{request.run_id}/{request.attempt}/{life.owner}")
        latency = rng.uniform(*kind.latency)
        roll = rng.random()
        status: int | None = 200
        after = latency
        if roll < kind.hang:
            status, after = None, float("inf")
        elif roll < kind.hang + kind.late:
            after = request.timeout_seconds + latency
        elif roll < kind.hang + kind.late + kind.throttle:
            status = 429
        elif roll < kind.hang + kind.late + kind.throttle + kind.fail:
            status = 500
        row = self._db.runs.get((request.run_id, request.scheduled_for))
        generation = row.lease_generation if row is not None and row.claimed_by == life.owner else -1
        loop = asyncio.get_running_loop()
        exchange = Exchange((request.run_id, request.scheduled_for), request.attempt, life,
                            generation, loop.time(), status, after <= request.timeout_seconds)
        self._trace.add("send", f"{life.owner} {short(request.run_id)}#{request.attempt} "
                        f"-> {status} after {after:.3f}")
        if status is not None:
            loop.call_later(after, self._checker.answered, exchange)
        return exchange, after


class SimDeliverer:
    """The Deliverer port of one replica incarnation."""

    def __init__(self, receivers: Receivers, life: Life, clock: Clock, checker: Checker,
                 faults: FaultState, retry_after: int) -> None:
        self._faults = faults
        self._receivers = receivers
        self._life = life
        self._clock = clock
        self._checker = checker
        self._retry_after = retry_after

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def deliver(self, request: DeliveryRequest) -> DeliveryResult:
        life = self._life
        await self._faults.held(life)
        if not life.alive:
            await park()
        send_by = request.send_by_monotonic
        if send_by is not None and self._clock.monotonic() > send_by:
            raise RequestNotSent(f"run {request.run_id}: send window closed")
        exchange, after = self._receivers.answer(request, life)
        started = self._clock.now()
        life.in_flight += 1
        self._checker.sent(life)
        try:
            await asyncio.sleep(min(after, request.timeout_seconds))
        finally:
            life.in_flight -= 1
        await self._faults.held(life)
        if not life.alive:
            await park()
        finished = started + timedelta(seconds=min(after, request.timeout_seconds))
        if not exchange.in_time:
            self._checker.heard(exchange, None)
            return DeliveryResult(Outcome.TIMEOUT, None, "TimeoutError: no answer in time",
                                  int(request.timeout_seconds * 1000), None, None,
                                  started, finished)
        status = exchange.status
        assert status is not None
        self._checker.heard(exchange, status)
        ok = 200 <= status < 300
        return DeliveryResult(
            Outcome.SUCCESS if ok else Outcome.HTTP_ERROR, status,
            None if ok else f"HTTPError: {status}", max(0, round(after * 1000)),
            "ok" if ok else "no", float(self._retry_after) if status == 429 else None,
            started, finished)
