"""CI's share of the simulation: 200 seeds per claim mode (CRONWIRE_SIM_SEEDS=10000 runs
the nightly size), in chunks of 25 seeds so that xdist spreads them and no chunk nears
the test timeout. Every seed runs the real services under its faults; no guarantee may
break."""

from __future__ import annotations

import sys

import pytest

from cronwire.cli.simulation import default_seeds
from cronwire.sim.run import run_seeds
from cronwire.sim.scenario import SimOptions

SEEDS = default_seeds()
PER_CHUNK = 25  # 4–6 CPU-seconds: far from the test timeout even on a loaded machine
CHUNKS = -(-SEEDS // PER_CHUNK)


@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("mode", ["postgres", "kafka"])
def test_no_seed_breaks_a_guarantee(mode: str, chunk: int, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    seeds = range(chunk * PER_CHUNK, min(SEEDS, (chunk + 1) * PER_CHUNK))
    summary = run_seeds(seeds, SimOptions(mode=mode), sys.stdout)
    printed = capsys.readouterr().out
    assert summary.seeds == len(seeds)
    assert summary.steps > 500 * len(seeds)  # each seed ran the world, not an empty loop
    assert summary.violations == 0, printed


# Seeds that found a bug, kept as regressions whatever CRONWIRE_SIM_SEEDS says.
FOUND = [
    # The memory claim ended an expired lease at the overlap gate without giving back
    # its flow-control slot (the key counted 2 in flight with 1 run leased at t=14.01 s);
    # Postgres's claim gives back the slots of every run it ends.
    (114, "kafka"),
]


@pytest.mark.parametrize(("seed", "mode"), FOUND)
def test_a_seed_that_found_a_bug_stays_clean(seed: int, mode: str) -> None:
    summary = run_seeds([seed], SimOptions(mode=mode), sys.stdout)
    assert summary.violations == 0
