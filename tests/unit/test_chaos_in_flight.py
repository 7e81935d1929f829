"""Which duplicates a kill or a stop explains: the receiver's arrivals against the leases
the interrupted replica held (cronwire.chaos.report.count_deliveries)."""

from __future__ import annotations

from cronwire.chaos.report import Deliveries, Interruption, count_deliveries

AT = 1_000.0  # the stop, epoch seconds
EXPIRES = AT + 2.9  # the stopped replica's lease on run "a"


def _seen(arrivals: dict[str, list[float]]) -> Deliveries:
    seen = Deliveries()
    for run_id, times in arrivals.items():
        seen.arrivals[run_id] = sorted(times)
        seen.counts[run_id] = len(times)
        seen.first_seen[run_id] = min(times)
    return seen


def _beyond(arrivals: dict[str, list[float]], stop: Interruption) -> object:
    planned = {run_id: AT for run_id in arrivals}
    return count_deliveries(planned, _seen(arrivals), [stop])["duplicates_beyond_in_flight"]


def _stop(expires: dict[str, float] | None = None) -> Interruption:
    return Interruption("r1", "stop", AT, {"a": (1, 1)}, expires or {})


def test_a_request_stamped_soon_after_the_stop_was_in_flight() -> None:
    assert _beyond({"a": [AT + 0.001, EXPIRES + 0.01]}, _stop({"a": EXPIRES})) == 0


def test_a_request_stamped_late_but_before_the_lease_expired_was_in_flight() -> None:
    # Written before the stop, stamped 0.4 s later by a starved sink: nobody else could
    # have sent it while the lease held.
    assert _beyond({"a": [AT + 0.4, EXPIRES + 0.01]}, _stop({"a": EXPIRES})) == 0
    # Without the expiry only the stamping slack counts, and that one is past it.
    assert _beyond({"a": [AT + 0.4, EXPIRES + 0.01]}, _stop()) == 1


def test_a_send_after_the_lease_passed_on_is_beyond_the_requests_in_flight() -> None:
    # The re-claiming replica delivered first; the stopped one woke and sent again.
    assert _beyond({"a": [EXPIRES + 0.01, AT + 4.5]}, _stop({"a": EXPIRES})) == 1


def test_runs_the_interrupted_replica_did_not_hold_are_never_explained() -> None:
    assert _beyond({"b": [AT + 0.001, AT + 0.002]}, _stop({"a": EXPIRES})) == 1
