"""The executor with a deliverer that begins attempts without a task (``begin``, docs/benchmarks.md#levers),
over the in-memory stores: the same delivery, lease and shutdown rules as with a task per
request (tests/unit/test_lease_rules_over_fakes.py), and no task per delivery."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
from cronwire.domain.errors import RequestNotSent
from cronwire.domain.model import ClaimedRun, RunStatus
from cronwire.ports.observability import NoTracer
from tests.support.fakes import BeginningDeliverer, answer
from tests.support.memory_executor import Rig


def _delivery_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks()
            if getattr(t.get_coro(), "__qualname__", "") == "Deliveries._deliver"]


async def test_begun_attempts_are_delivered_once_and_settled_without_a_task_each() -> None:
    rig = Rig(deliverer=BeginningDeliverer())
    rig.seed(20)
    rig.deliverer.hold.clear()
    async with rig.running(rig.executor(workers=8)):
        await rig.signals.started.wait_count(8, within=10)
        assert rig.deliverer.in_flight == 8
        assert _delivery_tasks() == []  # with a task per request: eight
        rig.deliverer.hold.set()
        await rig.signals.settled.wait_count(20, within=10)
    assert rig.statuses() == {"succeeded": 20}
    assert rig.deliverer.begun == 20
    assert set(rig.deliverer.by_run().values()) == {1}
    assert {a for _, a, _ in rig.db.attempts} == {1}
    assert rig.metrics.finished == {"succeeded": 20}


async def test_a_lease_found_gone_cancels_a_begun_attempt_and_drops_its_result() -> None:
    deliverer = BeginningDeliverer()
    rig = Rig(deliverer=deliverer)
    rig.seed(1)
    deliverer.hold.clear()
    async with rig.running(rig.executor(lease_seconds=0.3)):  # renewed every 0.1 s
        await rig.signals.started.wait_count(1, within=10)
        [run] = rig.db.runs.values()
        run.claimed_by, run.lease_generation = "another-replica", run.lease_generation + 1
        await rig.signals.abandoned.wait_count(1, within=10)
        assert rig.signals.lost.items == [run.id]
        assert deliverer.cancelled == 1 and deliverer.in_flight == 0
        deliverer.hold.set()
    assert (run.status, run.claimed_by) == (RunStatus.RUNNING, "another-replica")
    assert rig.db.attempts == {} and rig.signals.settled.items == []


async def test_shutdown_cancels_begun_attempts_past_the_grace_and_releases_their_runs() -> None:
    deliverer = BeginningDeliverer()
    rig = Rig(deliverer=deliverer)
    rig.seed(3)
    deliverer.hold.clear()
    await rig.stopped_after_starting(rig.executor(grace_seconds=0.2), 3)
    assert deliverer.cancelled == 3
    assert sorted(rig.signals.released.items) == sorted(r.id for r in rig.db.runs.values())
    assert rig.statuses() == {"pending": 3} and rig.db.attempts == {}


async def test_a_begun_attempt_found_too_late_to_send_is_given_back_not_attempted() -> None:
    """begin's own send-window check (RequestNotSent, nothing written): the lease is given
    back, no attempt recorded, and the run delivered later, once."""
    refused: list[DeliveryRequest] = []
    base = answer(200)

    def reply(request: DeliveryRequest) -> DeliveryResult:
        if not refused:
            refused.append(request)
            raise RequestNotSent("window closed")
        return base(request)

    deliverer = BeginningDeliverer(reply)
    rig = Rig(deliverer=deliverer)
    rig.seed(1)
    async with rig.running(rig.executor()):
        await rig.signals.settled.wait_count(1, within=10)
    assert deliverer.begun == 2 and len(refused) == 1
    assert rig.statuses() == {"succeeded": 1}
    assert [a for _, a, _ in rig.db.attempts] == [1]  # the refused one used no attempt
    assert rig.signals.abandoned.items == [refused[0].run_id]


class _TracingOn(NoTracer):
    enabled = True  # type: ignore[assignment]

    def traceparent(self, run: ClaimedRun) -> str:
        return "00-" + "1" * 32 + "-" + "2" * 16 + "-01"

    def claim(self, start_ns: int, end_ns: int, *, source: str,
              runs: Sequence[ClaimedRun]) -> None:
        return None

    def attempt(self, run: ClaimedRun, request: DeliveryRequest,
                result: DeliveryResult) -> None:
        self.attempts = getattr(self, "attempts", 0) + 1

    def result_write(self, start_ns: int, end_ns: int,
                     written: Sequence[tuple[ClaimedRun, RunStatus | None]]) -> None:
        return None


async def test_while_tracing_every_attempt_is_awaited_so_its_span_is_recorded() -> None:
    deliverer = BeginningDeliverer()
    tracer = _TracingOn()
    rig = Rig(deliverer=deliverer)
    rig.seed(5)
    async with rig.running(rig.executor(tracer=tracer)):
        await rig.signals.settled.wait_count(5, within=10)
    assert deliverer.begun == 0 and len(deliverer.requests) == 5
    assert tracer.attempts == 5
    assert all(r.traceparent for r in deliverer.requests)
