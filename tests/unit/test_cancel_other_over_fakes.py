"""cancel_other in the executor, over the in-memory stores, with a deliverer that answers
from a task and one that begins attempts without one (docs/benchmarks.md#levers): a request in flight whose
run a newer occurrence superseded (a claim anywhere moved the schedule's gate) is aborted
within the keeper's poll and written cancelled; its answer, had it come, is never awaited."""

from __future__ import annotations

import uuid

import pytest

from cronwire.domain.attempts import SUPERSEDED_ABORT
from cronwire.domain.model import OverlapPolicy, RunStatus
from tests.support.fakes import BeginningDeliverer, ScriptedDeliverer
from tests.support.memory_executor import Rig


@pytest.mark.parametrize("deliverer", [ScriptedDeliverer, BeginningDeliverer])
async def test_a_superseded_request_in_flight_is_aborted_and_written_cancelled(
    deliverer: type[ScriptedDeliverer],
) -> None:
    rig = Rig(deliverer=deliverer())
    schedule = rig.seed(1)
    [run] = rig.db.runs.values()
    run.overlap_policy = OverlapPolicy.CANCEL_OTHER
    rig.deliverer.hold.clear()
    # Leases of 60 s: renewed every 20 s, so only the superseded check can abort in time.
    async with rig.running(rig.executor(lease_seconds=60.0, delivery_timeout=30.0)):
        await rig.signals.started.wait_count(1, within=10)
        assert rig.deliverer.in_flight == 1
        # Another replica claimed a newer occurrence: the gate is no longer this run's.
        rig.db.schedules[schedule.id].overlap_run = (uuid.uuid4(), run.scheduled_for)
        await rig.signals.settled.wait_count(1, within=3)
        assert rig.deliverer.in_flight == 0
    assert run.status is RunStatus.CANCELLED
    assert run.last_error == SUPERSEDED_ABORT
    assert [a for _, a, _ in rig.db.attempts] == [1]  # the attempt is recorded
    assert rig.metrics.lost == 0
