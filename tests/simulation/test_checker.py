"""The checker's own rules, on hand-made rows: what it must flag, and a batch it once
flagged wrongly (a replica's writer holding a result of its older lease of a run and one
of the lease it took back: seed 17, postgres, --hours 0.1)."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest

from cronwire.domain.model import RunStatus
from cronwire.sim.checker import Checker, Violation
from cronwire.sim.database import SimDatabase, VirtualClock, seed_world
from cronwire.sim.faults import FaultState
from cronwire.sim.scenario import SimOptions, draw
from cronwire.sim.simulate import simulate
from cronwire.sim.trace import Trace


def _world() -> tuple[SimDatabase, Checker, list[Violation]]:
    loop = asyncio.new_event_loop()
    scenario = draw(1, SimOptions(schedules=1))
    db = SimDatabase(VirtualClock(scenario.start, loop), random.Random(0))
    schedule_id = seed_world(db, scenario, random.Random(1))[0]
    trace = Trace(loop.time)
    faults = FaultState(scenario, trace, loop.time, lambda life, crash: None)
    found: list[Violation] = []
    checker = Checker(db, trace, faults, lease_seconds=4.0, workers=4, now=loop.time,
                      stop=found.append)
    run = db.insert_run(schedule_id, db.now() + timedelta(seconds=5))
    assert run is not None
    run.status, run.claimed_by, run.lease_generation = RunStatus.RUNNING, "r0.0", 3
    loop.close()
    return db, checker, found


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
