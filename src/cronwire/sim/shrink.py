"""Shrinking a failing seed: its faults and tenant actions are dropped one at a time,
each drop kept if the same guarantee still breaks, within a budget of re-runs. What is
left is the shortest trace found, not the shortest there is."""

from __future__ import annotations

import re

from cronwire.sim.checker import Violation
from cronwire.sim.scenario import Scenario
from cronwire.sim.simulate import SeedResult, simulate

BUDGET = 40  # re-runs at most: each is one seed's simulation up to the violation
_IDS = re.compile(r"\b[0-9a-f]{8}\b")
_FAULTS = ("crash", "crash-in-call", "start", "ack-lost", "clock-jump", "backfill",
           "trigger", "delete", "hint-lost", "quiet", "VIOLATION")


def shrink(scenario: Scenario, violation: Violation, *, budget: int = BUDGET
           ) -> tuple[Scenario, SeedResult]:
    """The smallest scenario found that still breaks ``violation.kind``, and its run."""
    until = None if violation.at >= scenario.options.seconds else violation.at + 1.0
    best = scenario
    result = simulate(best, until=until)
    index = len(best.items) - 1
    while index >= 0 and budget > 0:
        budget -= 1
        candidate = best.without(index)
        attempt = simulate(candidate, until=until)
        if attempt.violation is not None and attempt.violation.kind == violation.kind:
            best, result = candidate, attempt
        index -= 1
    return best, result


def trace_lines(result: SeedResult, tail: int = 15) -> list[str]:
    """What explains the violation: the faults, every event naming a run the violation
    names, and the last ``tail`` events."""
    if result.violation is None:
        return result.events[-tail:]
    named = set(_IDS.findall(result.violation.message))
    last = len(result.events) - tail
    return [line for i, line in enumerate(result.events)
            if i >= last or line.split(" ", 2)[1] in _FAULTS
            or any(run in line for run in named)]
