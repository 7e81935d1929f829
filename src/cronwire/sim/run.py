"""``cronwire sim``: many seeds, each violation shrunk and printed with its seed, and one
JSON summary line (ADR 0062)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TextIO

from cronwire.sim.scenario import SimOptions, draw
from cronwire.sim.shrink import shrink, trace_lines
from cronwire.sim.simulate import SeedResult, simulate


@dataclass(frozen=True, slots=True)
class Summary:
    seeds: int
    violations: int
    steps: int
    simulated_seconds: float
    wall_seconds: float
    trace_hash: str

    def line(self) -> str:
        return json.dumps(asdict(self))


def run_seeds(seeds: Iterable[int], options: SimOptions, out: TextIO, *,
              shrinking: bool = True) -> Summary:
    """Simulate every seed; print each violation (seed, shrunk trace, the command that
    replays it). One seed's trace hash is its own; several seeds' is a hash of theirs."""
    started = time.perf_counter()  # the report's wall time; the simulation never reads it
    results: list[SeedResult] = []
    for seed in seeds:
        result = simulate(draw(seed, options))
        results.append(result)
        if result.violation is not None:
            report(result, options, out, shrinking=shrinking)
    if len(results) == 1:
        digest = results[0].trace_hash
    else:
        combined = hashlib.blake2b(digest_size=16)
        for result in results:
            combined.update(result.trace_hash.encode())
        digest = combined.hexdigest()
    return Summary(
        seeds=len(results), violations=sum(r.violation is not None for r in results),
        steps=sum(r.steps for r in results),
        simulated_seconds=round(sum(r.simulated_seconds for r in results), 3),
        wall_seconds=round(time.perf_counter() - started, 3), trace_hash=digest)


def report(result: SeedResult, options: SimOptions, out: TextIO, *, shrinking: bool) -> None:
    assert result.violation is not None
    print(f"violation: seed {result.seed} ({options.mode}): {result.violation}", file=out)
    print(f"  replay: cronwire sim --seed {result.seed} --mode {options.mode} "
          f"--schedules {options.schedules} --hours {options.hours:g}"
          f"  (trace_hash {result.trace_hash})", file=out)
    scenario = draw(result.seed, options)
    shown = result
    if shrinking:
        scenario, shown = shrink(scenario, result.violation)
    print(f"  shortest trace found ({len(scenario.items)} faults and actions kept):", file=out)
    for item in scenario.items:
        print(f"    {item}", file=out)
    for line in trace_lines(shown):
        print(f"    {line}", file=out)
