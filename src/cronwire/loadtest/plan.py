"""What a load test was asked for (the CLI builds it from its flags), and the error of a
run that could not be carried out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cronwire.harness.processes import HarnessError


class LoadTestError(HarnessError):
    """The load test could not run (a process would not start, a baseline failed)."""


@dataclass(frozen=True, slots=True)
class LoadTestPlan:
    mode: str
    schedules: int
    replicas: int
    duration: float
    out: Path
    scenario: str = "steady"
    cron: str = "* * * * * *"
    workers: int = 256
    dsn: str | None = None
    sink_latency_ms: float = 0.0
    sink_failure_rate: float = 0.0
    compare: bool = False
    keep_data: bool = False
    kafka_bootstrap: str | None = None  # kafka mode on the user's broker, else the embedded one
    # Every schedule's jitter_seconds; the lag is then measured from each fire_after.
    jitter_seconds: int = 0
    # The receiver: "nginx" (answers 200 at once, counted from its access log) or
    # "python" (the harness's sink, which can also answer slowly or fail).
    sink: str = "python"
    # The embedded Postgres loads pg_stat_statements; the statements' time per delivered
    # run is logged after the drain (statements.py).
    statements: bool = False

    def warmup_seconds(self) -> float:
        """From seeding to the first instant: the replicas' planner must have written
        every run before it, so the lag measured is the executor's. A burst's schedules
        fire once, so the idle planner writes them up to a minute early (ADR 0023), at
        about 10,000 runs/s on two cores: 100,000 need about 10 s, after the seeding and
        the replicas' start, which this also covers."""
        return 7.0 + self.schedules / 5_000
