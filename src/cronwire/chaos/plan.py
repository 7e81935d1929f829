"""What a chaos run was asked for (the CLI builds it from its flags), and the error of a
run that could not be set up."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cronwire.harness.processes import HarnessError


class ChaosError(HarnessError):
    """The harness could not set a scenario up (not a broken guarantee)."""


@dataclass(frozen=True, slots=True)
class ChaosPlan:
    mode: str
    faults: tuple[str, ...]
    schedules: int
    replicas: int
    duration: float
    out: Path
    burst: int = 50_000
    seed: int = 0
    dsn: str | None = None  # an admin DSN; None starts an embedded Postgres
    keep_data: bool = False  # keep the embedded Postgres's data directory in ``out``
