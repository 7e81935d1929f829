"""The load test's machine-wide CPU figure (harness/stats.busy_cpu_seconds) and the line it
logs (loadtest/run.cores_note): what the parties do not account for is visible."""

from __future__ import annotations

import os
import time

import pytest

from cronwire.harness.stats import busy_cpu_seconds, machine_busy_seconds
from cronwire.loadtest.report import Costs
from cronwire.loadtest.run import cores_note

TICKS = os.sysconf("SC_CLK_TCK")

#                   user nice system idle  iowait irq softirq steal guest guest_nice
PROC_STAT = """cpu  2034 7    319    670   28     3   137     1     50    0
cpu0 1000 3 150 300 10 1 70 0 25 0
cpu1 1034 4 169 370 18 2 67 1 25 0
intr 12345 0 0
ctxt 999
"""


def test_busy_is_every_field_but_idle_and_iowait_of_the_machine_line() -> None:
    # guest time is already inside user: counting it again would count it twice
    assert busy_cpu_seconds(PROC_STAT) == pytest.approx((2034 + 7 + 319 + 3 + 137 + 1) / TICKS)


@pytest.mark.parametrize("text", ["", "cpu0 1 2 3 4\n", "cpu  12 x 3 4 5 6 7 8\n"])
def test_a_text_without_a_readable_machine_line_gives_none(text: str) -> None:
    assert busy_cpu_seconds(text) is None


def test_the_machine_counts_at_least_the_cpu_this_process_burns() -> None:
    machine_before, own_before = machine_busy_seconds(), time.process_time()
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        sum(range(1000))
    machine_after, own_after = machine_busy_seconds(), time.process_time()
    assert machine_before is not None and machine_after is not None
    own = own_after - own_before
    assert own > 0.1
    # Both are counted in clock ticks: allow two ticks of rounding on each side.
    assert machine_after - machine_before >= own - 4 / TICKS


def test_the_line_says_the_cores_busy_and_the_parties_share_of_them() -> None:
    costs = Costs(replica_seconds=7.2, sink_seconds=1.3, sink="nginx", postgres_seconds=6.5,
                  machine_busy_seconds=16.0, window_seconds=10.0)
    assert cores_note(costs, 2) == (
        "the machine: 1.60 of 2 cores busy, first instant to the end of the drain "
        "(/proc/stat: every process and the kernel); the replicas 0.72, Postgres 0.65 and "
        "the sink 0.13: 1.50 of them")


def test_without_postgres_of_its_own_the_line_gives_the_machine_alone() -> None:
    costs = Costs(replica_seconds=7.2, sink_seconds=1.3, sink="nginx",
                  machine_busy_seconds=16.0, window_seconds=10.0)
    line = cores_note(costs, 2)
    assert line is not None and line.endswith("(/proc/stat: every process and the kernel)")


@pytest.mark.parametrize(("busy", "window", "cores"),
                         [(None, 10.0, 2), (16.0, None, 2), (16.0, 0.0, 2), (16.0, 10.0, None)])
def test_no_line_when_the_machine_or_the_window_is_unknown(
        busy: float | None, window: float | None, cores: int | None) -> None:
    costs = Costs(replica_seconds=1.0, machine_busy_seconds=busy, window_seconds=window)
    assert cores_note(costs, cores) is None
