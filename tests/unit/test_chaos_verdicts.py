"""The chaos command's verdicts: a fault that tested nothing is INCONCLUSIVE, not FAILED;
a fault whose bound does not fit the run's size is not run, and says which size it needs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cronwire.chaos.faults import FAULTS
from cronwire.chaos.lease_cut import lease_cut_tested_nothing, lease_cut_verdict
from cronwire.chaos.plan import ChaosPlan
from cronwire.chaos.report import figure_table
from cronwire.chaos.run import run_chaos_async
from cronwire.chaos.verdicts import FAILED, INCONCLUSIVE, PASSED, outcome, summary

REDUCED = {"schedules": 20, "duration": 8.0, "burst": 3000}
FULL = {"schedules": 300, "duration": 30.0, "burst": 50_000}


def _lease_cut_figures(**own: Any) -> dict[str, Any]:
    return {"lost": 0, "duplicates_beyond_in_flight": 0, "replica_exits": 0,
            "fault_figures": {"sends_beyond_in_flight_at_cut": 0, "reclaimed_after_expiry": 0,
                              "leases_cut_off": 0, "firing_seconds_after_release": 0, **own}}


def test_a_lease_cut_that_reclaimed_nothing_is_inconclusive_not_failed() -> None:
    figures = _lease_cut_figures()
    violations = lease_cut_verdict(figures)
    reason = lease_cut_tested_nothing(figures)
    assert violations == []
    assert reason is not None and "tested nothing" in reason and "0 leases cut off" in reason
    assert outcome(violations, reason) == INCONCLUSIVE


def test_a_lease_cut_that_reclaimed_is_judged_on_its_sends() -> None:
    figures = _lease_cut_figures(reclaimed_after_expiry=3, sends_beyond_in_flight_at_cut=1)
    assert lease_cut_tested_nothing(figures) is None
    assert outcome(lease_cut_verdict(figures), None) == FAILED
    clean = _lease_cut_figures(reclaimed_after_expiry=3)
    assert outcome(lease_cut_verdict(clean), lease_cut_tested_nothing(clean)) == PASSED


def test_a_broken_guarantee_outranks_a_fault_that_tested_nothing() -> None:
    figures = _lease_cut_figures()
    figures["lost"] = 2
    assert outcome(lease_cut_verdict(figures), lease_cut_tested_nothing(figures)) == FAILED


def test_only_a_failed_fault_fails_the_run_and_the_others_are_named() -> None:
    scenarios = {"kill": {"outcome": PASSED},
                 "lease-cut": {"outcome": INCONCLUSIVE, "inconclusive": "nothing re-claimed"}}
    verdict = summary(scenarios, {"fairness": "fairness: not run at this size"})
    assert verdict == {"passed": True, "failed": [],
                       "inconclusive": {"lease-cut": "nothing re-claimed"},
                       "not_run": {"fairness": "fairness: not run at this size"}}
    scenarios["kill"] = {"outcome": FAILED, "violations": ["lost=1"]}
    assert summary(scenarios, {})["passed"] is False
    assert summary(scenarios, {})["failed"] == ["kill"]


def test_the_table_says_inconclusive_and_why() -> None:
    row = {"planned": 10, "delivered": 10, "passed": True, "outcome": INCONCLUSIVE,
           "inconclusive": "nothing re-claimed after the cut", "violations": [],
           "fault_figures": {}}
    table = figure_table({"lease-cut": row})
    assert "INCONCLUSIVE: nothing re-claimed after the cut" in table
    assert "FAILED" not in table


def _plan(mode: str, tmp_path: Path, **size: Any) -> ChaosPlan:
    return ChaosPlan(mode=mode, faults=("fairness",), replicas=3, out=tmp_path, **size)


def test_kafka_fairness_is_not_run_at_the_reduced_size_and_names_the_size_it_needs(
    tmp_path: Path,
) -> None:
    check = FAULTS["fairness"].too_small
    assert check is not None
    reason = check(_plan("kafka", tmp_path, **REDUCED))
    assert reason is not None
    assert reason.startswith("fairness: not run at this size")
    assert "--duration 30 --burst 50000" in reason
    assert check(_plan("kafka", tmp_path, **FULL)) is None
    assert check(_plan("postgres", tmp_path, **REDUCED)) is None  # its bound fits


def test_a_fault_too_small_for_the_run_is_skipped_and_reported(tmp_path: Path) -> None:
    # Nothing starts (no Postgres, no broker): the only fault asked for is skipped.
    report = asyncio.run(run_chaos_async(_plan("kafka", tmp_path, **REDUCED)))
    assert report["scenarios"] == {}
    assert list(report["not_run"]) == ["fairness"]
    assert report["passed"] is True
