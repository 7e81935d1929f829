"""The simulator catches the bug classes it exists for: each one put back through a test
hook of the fakes (sim/mutations.py) is found within 200 seeds, as a violation of the
guarantee it breaks, in both claim modes."""

from __future__ import annotations

import pytest

from cronwire.sim.mutations import (
    NO_FLOW_RELEASE,
    NO_OWNER_PREDICATE,
    NO_RENEWAL,
    NO_UNIQUE_GUARD,
)
from cronwire.sim.scenario import SimOptions, draw
from cronwire.sim.simulate import simulate

WITHIN = 200
CAUGHT_AS = {
    NO_OWNER_PREDICATE: {"lease-rule-3", "history", "duplicate-delivery"},
    NO_UNIQUE_GUARD: {"one-run-per-occurrence"},
    NO_RENEWAL: {"lease-rule-2", "duplicate-delivery"},
    NO_FLOW_RELEASE: {"flow-accounting"},
}


@pytest.mark.parametrize("mode", ["postgres", "kafka"])
@pytest.mark.parametrize("mutation", sorted(CAUGHT_AS))
def test_a_known_bug_put_back_is_caught_within_200_seeds(mutation: str, mode: str) -> None:
    options = SimOptions(mode=mode, mutation=mutation)
    for seed in range(WITHIN):
        result = simulate(draw(seed, options))
        if result.violation is not None:
            assert result.violation.kind in CAUGHT_AS[mutation], str(result.violation)
            return
    pytest.fail(f"{mutation} went unnoticed for {WITHIN} seeds in {mode} mode")


def test_the_same_seeds_pass_without_the_mutation() -> None:
    """The mutation is what the violation is about: the seeds that catch it are clean
    on the real code."""
    for mutation in sorted(CAUGHT_AS):
        options = SimOptions(mutation=mutation)
        caught = next(seed for seed in range(WITHIN) if simulate(draw(seed, options)).violation)
        assert simulate(draw(caught, SimOptions())).violation is None
