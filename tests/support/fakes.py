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


class _Hold(asyncio.Event):
    """An Event that also runs callbacks when set (what a held begun attempt waits on:
    no task of its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.on_set: list[Callable[[], None]] = []

    def set(self) -> None:
        super().set()
        callbacks, self.on_set = self.on_set, []
        for callback in callbacks:
            callback()


class BeginningDeliverer(ScriptedDeliverer):
    """A ScriptedDeliverer that also begins attempts without a task (``begin``, the
    StartsDeliveries port): each future is answered by ``reply`` once ``hold`` is set."""

    def __init__(self, reply: Reply | None = None) -> None:
        super().__init__(reply)
        self.hold = _Hold()
        self.hold.set()
        self.begun = 0
        self.cancelled = 0

    def begin(self, request: DeliveryRequest) -> asyncio.Future[DeliveryResult]:
        self.requests.append(request)
        self.begun += 1
        self.in_flight += 1
        future: asyncio.Future[DeliveryResult] = asyncio.get_running_loop().create_future()
        future.add_done_callback(self._ended)

        def answer_it() -> None:
            if not future.done():
                future.set_result(self.reply(request))

        if self.hold.is_set():
            answer_it()
        else:
            self.hold.on_set.append(answer_it)
        return future

    def _ended(self, future: asyncio.Future[DeliveryResult]) -> None:
        self.in_flight -= 1
        self.cancelled += future.cancelled()


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

    def set_client_certificate_expiry(self, not_after: datetime | None) -> None: ...

    def set_broker_up(self, up: bool) -> None: ...

    def alert_delivered(self, outcome: str) -> None: ...

    def stats_query(self, seconds: float) -> None: ...
