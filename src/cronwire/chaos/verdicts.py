"""What a chaos run may honestly say about each fault: passed, FAILED (a guarantee broke),
INCONCLUSIVE (the fault tested nothing, so it proves nothing either way), or not run at
this size (its bound means something only in a bigger run).

Only FAILED makes the command exit 1: a fault that tested nothing broke nothing, and a
user checking a build must not read "a guarantee broke" where none did. Both other
outcomes are named in the table and in the JSON line, so nobody reads them as a pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PASSED = "ok"
FAILED = "FAILED"
INCONCLUSIVE = "INCONCLUSIVE"


def outcome(violations: list[str], inconclusive: str | None) -> str:
    """A broken guarantee outranks a fault that tested nothing: a run that lost a run
    failed whether or not the fault itself bit."""
    if violations:
        return FAILED
    return INCONCLUSIVE if inconclusive else PASSED


def verdict_cell(figures: Mapping[str, Any]) -> str:
    """The table's verdict column for one scenario."""
    kind = figures.get("outcome", PASSED if figures.get("passed") else FAILED)
    if kind == FAILED:
        return f"{FAILED}: " + ", ".join(map(str, figures.get("violations", [])))
    if kind == INCONCLUSIVE:
        return f"{INCONCLUSIVE}: {figures.get('inconclusive')}"
    return PASSED


def summary(scenarios: Mapping[str, Mapping[str, Any]],
            not_run: Mapping[str, str]) -> dict[str, Any]:
    """The run's verdict: passed unless a fault FAILED, with the faults that proved
    nothing and those skipped at this size listed by name."""
    return {
        "passed": all(f.get("outcome") != FAILED for f in scenarios.values()),
        "failed": [n for n, f in scenarios.items() if f.get("outcome") == FAILED],
        "inconclusive": {n: f.get("inconclusive") for n, f in scenarios.items()
                         if f.get("outcome") == INCONCLUSIVE},
        "not_run": dict(not_run),
    }


def too_small(plan_duration: float, plan_burst: int, *, duration: float,
              burst: int) -> bool:
    return plan_duration < duration or plan_burst < burst
