"""The failover faults' accounting (chaos/failover.py): which second deliveries the
database explains, and what each verdict refuses."""

from __future__ import annotations

from typing import Any

from cronwire.chaos.failover import (
    async_failover_verdict,
    duplicates_by_cause,
    failover_verdict,
)
from cronwire.chaos.report import Deliveries


def _seen(counts: dict[str, int]) -> Deliveries:
    seen = Deliveries()
    for run_id, count in counts.items():
        seen.counts[run_id] = count
        seen.first_seen[run_id] = 0.0
        seen.arrivals[run_id] = [0.0] * count
    return seen


def test_a_second_delivery_is_explained_only_by_an_outcome_the_database_lacks() -> None:
    seen = _seen({"once": 1, "outcome-lost": 2, "both-recorded": 2, "never-recorded": 3})
    recorded = {"once": 1, "outcome-lost": 1, "both-recorded": 2}
    assert duplicates_by_cause(recorded, seen) == {
        "duplicates_outcome_lost": 1 + 2, "duplicates_unexplained": 1}


def _figures(**overrides: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "lost": 0, "duplicates": 0, "duplicates_beyond_in_flight": 0,
        "unplanned_deliveries": 0, "replica_exits": 0,
        "fault_figures": {"resumed_seconds_after_promotion": 0.1,
                          "duplicates_outcome_lost": 0, "duplicates_unexplained": 0},
    }
    own = overrides.pop("own", {})
    figures.update(overrides)
    figures["fault_figures"].update(own)
    return figures


def test_a_synchronous_failover_allows_no_duplicate_beyond_the_requests_in_flight() -> None:
    assert failover_verdict(_figures()) == []
    assert failover_verdict(_figures(
        duplicates=5, duplicates_beyond_in_flight=5, own={"duplicates_outcome_lost": 5},
    )) == ["duplicates_beyond_in_flight=5"]


def test_an_asynchronous_failover_allows_duplicates_whose_outcome_was_lost_only() -> None:
    assert async_failover_verdict(_figures(
        duplicates=900, duplicates_beyond_in_flight=708, own={"duplicates_outcome_lost": 900},
    )) == []
    assert async_failover_verdict(_figures(own={"duplicates_unexplained": 2})) == [
        "duplicates_unexplained=2"]
    assert async_failover_verdict(_figures(lost=1, unplanned_deliveries=3)) == [
        "lost=1", "unplanned_deliveries=3"]


def test_every_failover_needs_live_replicas_and_a_delivery_after_the_promotion() -> None:
    broken = failover_verdict(_figures(replica_exits=1,
                                       own={"resumed_seconds_after_promotion": None}))
    assert broken == ["replica_exits=1", "no delivery after the promotion"]
