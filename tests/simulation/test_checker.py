"""The checker's own rules, on hand-made rows: what it must flag, and a batch it once
flagged wrongly (a replica's writer holding a result of its older lease of a run and one
of the lease it took back: seed 17, postgres, --hours 0.1)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from datetime import timedelta

import pytest

from cronwire.adapters.memory import MemoryRun
from cronwire.adapters.memory.flow_gate import KEY_SLOT
from cronwire.domain.flow_control import FlowControl
from cronwire.domain.model import RunStatus
from cronwire.sim.checker import Checker, Violation
from cronwire.sim.database import SimDatabase, VirtualClock, seed_world
from cronwire.sim.faults import FaultState
from cronwire.sim.scenario import SimOptions, draw
from cronwire.sim.simulate import simulate
from cronwire.sim.trace import Trace


def _world(flow: FlowControl | None = None, runs: int = 1,
           ) -> tuple[SimDatabase, Checker, list[Violation]]:
    """One schedule (under ``flow``) and ``runs`` of it, the first leased by r0.0."""
    loop = asyncio.new_event_loop()
    scenario = draw(1, SimOptions(schedules=1))
    scenario = replace(scenario, schedules=tuple(replace(s, flow=flow)
                                                 for s in scenario.schedules))
    db = SimDatabase(VirtualClock(scenario.start, loop), random.Random(0))
    schedule_id = seed_world(db, scenario, random.Random(1))[0]
    trace = Trace(loop.time)
    faults = FaultState(scenario, trace, loop.time, lambda life, crash: None)
    found: list[Violation] = []
    checker = Checker(db, trace, faults, lease_seconds=4.0, workers=4, now=loop.time,
                      stop=found.append)
    for n in range(runs):
        inserted = db.insert_run(schedule_id, db.now() + timedelta(seconds=5 + n))
        assert inserted is not None
    run = next(iter(db.runs.values()))
    run.status, run.claimed_by, run.lease_generation = RunStatus.RUNNING, "r0.0", 3
    loop.close()
    return db, checker, found


def _lease(db: SimDatabase, run: MemoryRun, slot: bool = True) -> None:
    """What a claim that admits ``run`` under its key writes."""
    run.status, run.claimed_by = RunStatus.RUNNING, "r1.0"
    if slot:
        run.flow_slots = KEY_SLOT
        db.flow[(run.tenant_id, run.flow_key or "")].in_flight += 1


def _snapshot(db: SimDatabase):  # type: ignore[no-untyped-def]
    return {key: (r.claimed_by, r.lease_generation, r.status, r.version)
            for key, r in db.runs.items()}


def test_a_batch_naming_an_older_lease_and_the_held_one_is_the_holders_write() -> None:
    db, checker, found = _world()
    (key, run), = db.runs.items()
    before = _snapshot(db)
    run.version += 1  # the generation-3 entry landed
    checker.write("r0.0", [(key, 2), (key, 3)], before)
    assert found == []


def test_a_write_under_a_generation_not_held_is_flagged() -> None:
    db, checker, found = _world()
    (key, run), = db.runs.items()
    before = _snapshot(db)
    run.version += 1
    checker.write("r0.0", [(key, 2)], before)
    assert [v.kind for v in found] == ["lease-rule-3"]


def test_a_write_by_another_owner_is_flagged() -> None:
    db, checker, found = _world()
    (key, run), = db.runs.items()
    before = _snapshot(db)
    run.version += 1
    checker.write("r1.0", [(key, 3)], before)
    assert [v.kind for v in found] == ["lease-rule-3"]


def test_a_second_run_for_one_occurrence_is_flagged_at_its_insert() -> None:
    db, checker, found = _world()
    db.on_insert = checker.inserted
    (_key, run), = db.runs.items()
    db.unique_guard = False
    assert db.insert_run(run.schedule_id, run.scheduled_for) is not None
    assert [v.kind for v in found] == ["one-run-per-occurrence"]


def test_an_error_no_code_handled_is_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A callback that raises mid-seed (here the receivers' answer) stops the seed."""
    def broken(self: Checker, exchange: object) -> None:
        raise RuntimeError("a bug in a callback")

    monkeypatch.setattr(Checker, "answered", broken)
    result = simulate(draw(0, SimOptions()))
    assert result.violation is not None
    assert result.violation.kind == "unhandled-error"
    assert "a bug in a callback" in result.violation.message


def _flow_world(flow: FlowControl) -> tuple[SimDatabase, Checker, list[Violation], list[MemoryRun]]:
    db, checker, found = _world(flow, runs=4)
    runs = sorted(db.runs.values(), key=lambda r: r.scheduled_for)
    runs[0].status = RunStatus.PENDING  # nothing leased yet
    checker.flow.sync()
    return db, checker, found, runs


def test_a_key_leased_beyond_its_concurrency_is_flagged() -> None:
    db, checker, found, runs = _flow_world(FlowControl(max_concurrency=2))
    for run in runs[:2]:
        _lease(db, run)
    checker.flow.sync()
    assert found == []
    _lease(db, runs[2])
    checker.flow.sync()
    assert [v.kind for v in found] == ["flow-concurrency"]


def test_starts_beyond_the_bucket_are_flagged() -> None:
    db, checker, found, runs = _flow_world(FlowControl(rate_per_second=1.0, burst=2))
    for run in runs[:2]:
        _lease(db, run)
    checker.flow.sync()
    assert found == []
    _lease(db, runs[2])
    checker.flow.sync()
    assert [v.kind for v in found] == ["flow-rate"]


def test_a_start_during_a_retry_after_hold_is_flagged() -> None:
    db, checker, found, runs = _flow_world(FlowControl())
    run = runs[0]
    checker.flow.held(run.tenant_id, run.flow_key, db.now(), 30.0)
    _lease(db, run)
    checker.flow.sync()
    assert [v.kind for v in found] == ["flow-hold"]


def test_a_slot_not_taken_or_not_given_back_is_flagged() -> None:
    db, checker, found, runs = _flow_world(FlowControl(max_concurrency=3))
    _lease(db, runs[0], slot=False)
    checker.flow.sync()
    assert [v.kind for v in found] == ["flow-accounting"]
    db, checker, found, runs = _flow_world(FlowControl(max_concurrency=3))
    _lease(db, runs[0])
    checker.flow.sync()
    runs[0].status = RunStatus.SUCCEEDED  # ended, its slot kept
    checker.flow.sync()
    assert [v.kind for v in found] == ["flow-accounting"]
