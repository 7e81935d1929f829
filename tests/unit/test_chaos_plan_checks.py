"""The one check of which faults a chaos run may inject (the CLI and the harness share it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cronwire.chaos.faults import FAULTS
from cronwire.chaos.plan import ChaosError, ChaosPlan
from cronwire.chaos.plan_checks import fault_refusal
from cronwire.chaos.run import run_chaos_async


def test_every_fault_of_a_mode_passes_on_the_embedded_server() -> None:
    for mode in ("postgres", "kafka"):
        faults = [name for name, spec in FAULTS.items() if mode in spec.modes]
        assert fault_refusal(mode, faults, None) is None


def test_refusals_name_the_flag_and_the_reason() -> None:
    assert fault_refusal("postgres", ["nope"], None) == (
        f"--faults: unknown fault 'nope'; choose from {', '.join(FAULTS)}")
    assert fault_refusal("postgres", ["broker-kill"], None) == (
        "--faults: broker-kill needs --mode kafka")
    own = next(name for name, spec in FAULTS.items() if spec.needs_own_postgres)
    refusal = fault_refusal("postgres", [own], "postgresql://elsewhere/db")
    assert refusal is not None and refusal.startswith(f"--faults: {own} stops Postgres")


def test_the_harness_refuses_with_the_same_line_before_starting_anything(tmp_path: Path) -> None:
    plan = ChaosPlan(mode="postgres", faults=("broker-kill",), schedules=1, replicas=2,
                     duration=5.0, out=tmp_path / "out")
    with pytest.raises(ChaosError, match=r"^--faults: broker-kill needs --mode kafka$"):
        asyncio.run(run_chaos_async(plan))


def test_a_proxy_fault_refuses_a_url_naming_several_servers() -> None:
    proxied = [name for name, spec in FAULTS.items() if spec.proxy or spec.victim_proxy]
    assert proxied
    for name in proxied:
        refusal = fault_refusal("postgres", [name], "postgresql://u@db1:5432,db2:5432/cw")
        assert refusal == (f"--faults: {name} puts a proxy in front of one server, and "
                           "SCHEDULER_DATABASE_URL names several")
        assert fault_refusal("postgres", [name], "postgresql://u@db1:5432/cw") is None
