"""Test doubles of the ports the in-memory stores do not cover: a scripted Deliverer and
a Metrics that counts. With cronwire.adapters.memory they run a service with no I/O."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from uuid import UUID

from cronwire.domain.delivery import DeliveryRequest, DeliveryResult, Outcome

Reply = Callable[[DeliveryRequest], DeliveryResult]


def answer(status: int) -> Reply:
    """Every request answered with ``status``."""

    def reply(request: DeliveryRequest) -> DeliveryResult:
        now = datetime.now(UTC)
        ok = 200 <= status < 300
        return DeliveryResult(
            outcome=Outcome.SUCCESS if ok else Outcome.HTTP_ERROR, status_code=status,
            error=None if ok else f"HTTPError: {status}", duration_ms=1,
            response_excerpt="ok", retry_after_seconds=None, started_at=now, finished_at=now,
        )

    return reply


class ScriptedDeliverer:
    """Answers by ``reply``; ``hold`` keeps requests in flight until released."""

    def __init__(self, reply: Reply | None = None) -> None:
        self.reply = reply or answer(200)
        self.requests: list[DeliveryRequest] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.in_flight = 0

    def by_run(self) -> Counter[UUID]:
        return Counter(r.run_id for r in self.requests)

    async def deliver(self, request: DeliveryRequest) -> DeliveryResult:
        self.requests.append(request)
        self.in_flight += 1
        try:
            await self.hold.wait()
        finally:
            self.in_flight -= 1
        return self.reply(request)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


class CountingMetrics:
    def __init__(self) -> None:
        self.finished: Counter[str] = Counter()
        self.lost = 0
        self.claimed = 0
        self.claimed_by: Counter[str] = Counter()
        self.breakers_open = -1

    def claims(self, source: str, count: int) -> None:
        self.claimed += count
        self.claimed_by[source] += count

    def run_finished(self, outcome: str, count: int = 1) -> None:
        self.finished[outcome] += count

    def lease_lost(self, count: int = 1) -> None:
        self.lost += count

    def fire_lag(self, seconds: float) -> None: ...

    def delivery_duration(self, seconds: float) -> None: ...

    def planner_tick(self, seconds: float) -> None: ...

    def set_backlog(self, runs: int) -> None: ...

    def set_clock_skew(self, seconds: float) -> None: ...

    def set_breakers_open(self, targets: int) -> None:
        self.breakers_open = targets

    def set_partitions_ahead(self, months: int) -> None: ...

    def set_flow_waiting(self, runs: int) -> None: ...

    def set_broker_up(self, up: bool) -> None: ...

    def alert_delivered(self, outcome: str) -> None: ...

    def stats_query(self, seconds: float) -> None: ...
