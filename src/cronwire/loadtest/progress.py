"""The live progress line on stderr: delivered/s, backlog, lag p99 of the last second.

On a terminal it is one line rewritten in place (``\\r``); otherwise (CI logs, a pipe) a
plain line every few seconds.
"""

from __future__ import annotations

import bisect
import sys
import time
from collections.abc import Callable


class Progress:
    """The progress line. Its rate is over the time since the line was last printed (not
    the last sample, a quarter of a second that is often empty); the closing line gives
    the report's figures (it once said "0/s")."""

    def __init__(self, instants: list[float], schedules: int, *, every: float = 5.0,
                 tty: bool | None = None, wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._instants = sorted(instants)
        self._schedules = schedules
        self._tty = sys.stderr.isatty() if tty is None else tty
        self._every = 0.0 if self._tty else every
        self._wall = wall
        self._monotonic = monotonic
        self._last_show = float("-inf")
        self._shown: tuple[float, float] | None = None  # (time, unique) at the last line

    @property
    def planned(self) -> int:
        return len(self._instants) * self._schedules

    def seconds_to_horizon(self) -> float:
        return self._instants[-1] - self._wall() if self._instants else 0.0

    def seconds_to_first(self) -> float:
        return self._instants[0] - self._wall() if self._instants else 0.0

    def due(self) -> int:
        """Occurrences whose instant has passed."""
        return bisect.bisect_right(self._instants, self._wall()) * self._schedules

    def backlog(self, stats: dict[str, float | None]) -> int:
        return self.due() - int(stats.get("unique") or 0)

    def show(self, stats: dict[str, float | None]) -> None:
        now = self._monotonic()
        if now - self._last_show < self._every:
            return
        unique = float(stats.get("unique") or 0)
        rate = 0.0
        if self._shown is not None and now > self._shown[0]:
            rate = (unique - self._shown[1]) / (now - self._shown[0])
        self._shown = (now, unique)
        self._last_show = now
        self._write(self._when(), stats, f"{rate:,.0f}/s")

    def done(self, delivered: int, runs_per_second: float, lag_p99_ms: float) -> None:
        """The closing line, with the final report's own figures (it once gave the
        sink's count over the time to the end of the drain check, and read as the same
        figure as report.json's ``runs_per_second``, which it was not)."""
        line = (f"[loadtest] done | delivered {delivered:,}/{self.planned:,} | "
                f"{runs_per_second:,.1f}/s, first instant to the last acknowledgement "
                f"(report.json's runs_per_second) | lag p99 {lag_p99_ms / 1000:.2f}s")
        if self._tty:
            sys.stderr.write("\r" + line.ljust(110) + "\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def _when(self) -> str:
        to_go = self.seconds_to_horizon()
        if self._instants and self._wall() < self._instants[0]:
            return f"first fire in {self._instants[0] - self._wall():.0f}s"
        return f"horizon in {to_go:.0f}s" if to_go > 0 else f"draining +{-to_go:.0f}s"

    def _write(self, when: str, stats: dict[str, float | None], rate: str) -> None:
        lag = stats.get("lag_p99_ms")
        line = (f"[loadtest] {when} | delivered {int(stats.get('unique') or 0):,}/"
                f"{self.planned:,} | {rate} | backlog {max(0, self.backlog(stats)):,} "
                f"| lag p99 {'-' if lag is None else f'{lag / 1000:.2f}s'}"
                f" | sink 503s {int(stats.get('failed') or 0):,}")
        if self._tty:
            sys.stderr.write("\r" + line.ljust(110))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
