"""Per-schedule stats over a window of its history (pure: the figures and their rules)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

# The windows a tenant may ask for, by name, in seconds.
WINDOWS: dict[str, int] = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400}
DEFAULT_WINDOW = "24h"
# Every skip reason a run can carry; each is reported, zero or not, so a client can rely on
# the keys: the overlap policy's skips, the misfire policy's and the calendars' (ADR 0064).
SKIP_REASONS = ("overlap", "misfire", "calendar")


@dataclass(frozen=True, slots=True)
class Percentiles:
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


@dataclass(frozen=True, slots=True)
class ScheduleStats:
    """Runs whose ``scheduled_for`` lies in ``(now - window, now]``, every trigger counted.

    ``fire_lag_ms``: first attempt start minus ``scheduled_for`` (database clock) of the
    finished runs that started; ``duration_ms``: the duration of the attempt that ended
    each finished run (runs still in flight join both once they end). Both percentiles are
    rounded to three significant digits (within 0.5 %: ``domain.stats_summary``).
    ``consecutive_failures`` and the last success and failure look past the window (the
    latest ones the history still holds)."""

    window: str
    occurrences: int
    succeeded: int
    failed: int
    cancelled: int
    skipped: dict[str, int] = field(default_factory=dict)
    fire_lag_ms: Percentiles = Percentiles()
    duration_ms: Percentiles = Percentiles()
    consecutive_failures: int = 0
    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None

    @property
    def success_rate(self) -> float | None:
        """Succeeded over finished deliveries (succeeded + failed); None when none finished.
        Skipped and cancelled runs were never delivered, so they do not count."""
        delivered = self.succeeded + self.failed
        return round(self.succeeded / delivered, 4) if delivered else None
