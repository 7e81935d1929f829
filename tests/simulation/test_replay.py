"""A seed is its run: the same seed gives the same trace hash (in one process and in a
fresh one with another hash seed), a violation replays to the same trace, and the
command prints the contract's summary line."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from cronwire.cli.main import main
from cronwire.sim.mutations import NO_OWNER_PREDICATE
from cronwire.sim.run import run_seeds
from cronwire.sim.scenario import SimOptions, draw
from cronwire.sim.simulate import simulate

SUMMARY_KEYS = {"seeds", "violations", "steps", "simulated_seconds", "wall_seconds",
                "trace_hash"}


def _cli(*args: str, hash_seed: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    return subprocess.run([sys.executable, "-m", "cronwire.cli.main", "sim", *args],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def test_a_seed_gives_the_same_trace_hash_twice_in_one_process() -> None:
    for mode in ("postgres", "kafka"):
        first = simulate(draw(7, SimOptions(mode=mode)))
        again = simulate(draw(7, SimOptions(mode=mode)))
        assert first.trace_hash == again.trace_hash
        assert first.events == again.events
        assert first.steps == again.steps


def test_a_violation_replays_to_the_same_trace() -> None:
    options = SimOptions(mutation=NO_OWNER_PREDICATE)
    seed = next(s for s in range(200) if simulate(draw(s, options)).violation is not None)
    first, again = simulate(draw(seed, options)), simulate(draw(seed, options))
    assert first.violation == again.violation
    assert first.trace_hash == again.trace_hash


def test_the_command_replays_a_seed_across_processes_and_hash_seeds() -> None:
    one = _cli("--seed", "11", "--mode", "kafka", hash_seed="1")
    two = _cli("--seed", "11", "--mode", "kafka", hash_seed="2")
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    first, second = (json.loads(run.stdout.strip().splitlines()[-1]) for run in (one, two))
    assert set(first) == SUMMARY_KEYS
    assert first["seeds"] == 1 and first["violations"] == 0 and first["steps"] > 0
    assert first["trace_hash"] == second["trace_hash"]
    assert first["trace_hash"] == simulate(draw(11, SimOptions(mode="kafka"))).trace_hash


def test_a_violation_is_printed_with_its_seed_a_shrunk_trace_and_its_replay() -> None:
    options = SimOptions(mutation=NO_OWNER_PREDICATE)
    seed = next(s for s in range(200) if simulate(draw(s, options)).violation is not None)
    out = io.StringIO()
    summary = run_seeds([seed], options, out)
    printed = out.getvalue()
    assert summary.violations == 1
    assert f"violation: seed {seed} (postgres): lease-rule-3" in printed
    assert f"cronwire sim --seed {seed} --mode postgres" in printed
    kept = int(printed.split("shortest trace found (")[1].split()[0])
    assert kept < len(draw(seed, options).items)  # the shrinker dropped what did not matter
    assert "VIOLATION lease-rule-3" in printed


def test_bad_flags_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--seeds", "0"], ["--hours", "nan"], ["--mode", "redis"],
                 ["--seed", "1", "--seeds", "2"], ["--schedules", "x"], ["--seed", "-1"]):
        with pytest.raises(SystemExit) as exited:
            main(["sim", *args])
        assert exited.value.code == 2, args
        printed = capsys.readouterr()
        assert printed.out == "" and len(printed.err.strip().splitlines()) == 1, printed.err
