"""The Executor over the in-memory stores: claim, deliver, write, defer, drain; no I/O."""

from __future__ import annotations

from datetime import timedelta

from cronwire.adapters.memory import MemoryClaimSource, MemoryClock, MemoryDatabase
from cronwire.domain.breaker import BreakerState, BreakerStatus, target_key
from cronwire.domain.model import RetryPolicy, RunStatus
from tests.support.fakes import ScriptedDeliverer, answer
from tests.support.memory_executor import URL, Rig
from tests.support.polling import wait_until


async def test_every_due_run_is_delivered_once_and_settled() -> None:
    rig = Rig()
    rig.seed(20)
    async with rig.running(rig.executor()):
        await rig.signals.settled.wait_count(20, within=10)
    assert rig.statuses() == {"succeeded": 20}
    assert set(rig.deliverer.by_run().values()) == {1}
    assert rig.metrics.finished == {"succeeded": 20}
    assert {a for _, a, _ in rig.db.attempts} == {1}


async def test_a_failing_target_is_retried_until_its_attempts_are_spent() -> None:
    rig = Rig(deliverer=ScriptedDeliverer(answer(503)))
    rig.seed(2, retry=RetryPolicy(3, 0.01, 0.02))
    async with rig.running(rig.executor()):
        await wait_until(lambda: rig.statuses() == {"failed": 2}, within=10)
    assert set(rig.deliverer.by_run().values()) == {3}
    assert sorted(a for _, a, _ in rig.db.attempts) == [1, 1, 2, 2, 3, 3]


async def test_an_open_breaker_defers_runs_without_using_an_attempt() -> None:
    rig = Rig()
    schedule = rig.seed(3)
    now = rig.db.now()
    rig.db.breakers[(schedule.tenant_id, target_key(URL))] = BreakerState(
        BreakerStatus.OPEN, failures=5, opened_until=now + timedelta(hours=1))
    async with rig.running(rig.executor()):
        await rig.signals.deferred.wait_count(3, within=10)
    assert rig.deliverer.requests == []
    assert {(r.status, r.attempt_count) for r in rig.db.runs.values()} == {(RunStatus.PENDING, 0)}
    assert all(r.fire_after == now + timedelta(hours=1) for r in rig.db.runs.values())


async def test_shutdown_releases_what_did_not_finish_in_the_grace_period() -> None:
    rig = Rig()
    rig.seed(3)
    rig.deliverer.hold.clear()  # requests hang
    await rig.stopped_after_starting(rig.executor(grace_seconds=0.2), 3)
    assert sorted(rig.signals.released.items) == sorted(r.id for r in rig.db.runs.values())
    assert {(r.status, r.claimed_by is not None) for r in rig.db.runs.values()} == {
        (RunStatus.PENDING, True)}
    assert {r.attempt_count for r in rig.db.runs.values()} == {0}


async def test_the_send_deadline_is_fixed_before_the_claim_and_a_stall_after_it_sends_nothing(
) -> None:
    """The chaos stall fault's late send: the deadline was a duration, measured again when
    the deliverer was entered, so a SIGSTOP between the executor's check and that entry
    moved it past the stall. Now it is an instant read before the claim left: half the
    lease after it, whatever happens between then and the write."""
    from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
    from cronwire.domain.errors import RequestNotSent

    rig = Rig(db=MemoryDatabase(clock=MemoryClock(frozen=True)))
    asked_at = rig.db.clock.monotonic()
    deadlines: list[float] = []
    base = answer(200)

    def stall_then_reply(request: DeliveryRequest) -> DeliveryResult:
        assert request.send_by_monotonic is not None
        deadlines.append(request.send_by_monotonic)
        if len(deadlines) == 1:
            rig.db.clock.advance(4.5)  # stopped here for 1.5 x the 3 s lease
            if rig.db.clock.monotonic() > request.send_by_monotonic:  # the write's check
                raise RequestNotSent("send window closed")
        return base(request)

    rig.deliverer = ScriptedDeliverer(stall_then_reply)
    rig.seed(1)
    async with rig.running(rig.executor()):
        await rig.signals.settled.wait_count(1, within=10)
    # Each claim's own: the first from before the stall, the re-claim's from after it.
    assert deadlines == [asked_at + 3.0 / 2, asked_at + 4.5 + 3.0 / 2]
    assert rig.statuses() == {"succeeded": 1}
    assert [a for _, a, _ in rig.db.attempts] == [1]  # the stalled one used no attempt
    assert len(rig.signals.abandoned.items) == 1


async def test_a_request_the_deliverer_found_too_late_to_send_is_given_back_not_attempted() -> None:
    """The deliverer's own send-window check (RequestNotSent) is the executor's "lease too
    old to send" verdict: no attempt recorded, the lease given back, delivered later once."""
    from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
    from cronwire.domain.errors import RequestNotSent

    refused: list[DeliveryRequest] = []
    base = answer(200)

    def reply(request: DeliveryRequest) -> DeliveryResult:
        assert request.send_by_monotonic is not None  # the executor always sets it
        if not refused:
            refused.append(request)
            raise RequestNotSent("window closed")
        return base(request)

    rig = Rig(deliverer=ScriptedDeliverer(reply))
    rig.seed(1)
    async with rig.running(rig.executor()):
        await rig.signals.settled.wait_count(1, within=10)
    assert len(refused) == 1
    assert rig.statuses() == {"succeeded": 1}
    assert [a for _, a, _ in rig.db.attempts] == [1]  # the refused one used no attempt
    assert rig.signals.abandoned.items == [refused[0].run_id]


async def test_a_claim_drawing_on_two_sources_counts_each_runs_under_its_own_label() -> None:
    """Kafka mode's backlogged claim takes runs fairly and by key in one batch:
    scheduler_claims_total{source} must count each run once, under the path that took it."""
    from cronwire.adapters.memory import MemoryHints, MemoryKeyedClaims
    from cronwire.service.executor.hybrid_claims import HybridClaimSource

    rig = Rig()
    burst = rig.db.add_due_runs(rig.seed(0).id, 12, due_seconds_ago=10)
    hints = MemoryHints(buffer_limit=4)
    hints.deliver([run.key for run in burst[6:]])  # a full buffer: backlogged
    # The first claim is the mixed one; once caught up, the sweeper takes what has no key.
    source = HybridClaimSource(hints, MemoryKeyedClaims(rig.db), MemoryClaimSource(rig.db),
                               rig.db.clock, grace_seconds=0, sweep_seconds=0)
    async with rig.running(rig.executor(claim_source=source)):
        await wait_until(lambda: rig.statuses() == {"succeeded": 12}, within=10)
    assert len(rig.deliverer.requests) == 12
    assert rig.metrics.claimed == 12
    assert rig.metrics.claimed_by["sweeper"] > 0 and rig.metrics.claimed_by["kafka"] > 0
