"""The live progress line on stderr: delivered/s, backlog, lag p99 of the last second.

On a terminal it is one line rewritten in place (``\\r``); otherwise (CI logs, a pipe) a
plain line every few seconds.
"""

from __future__ import annotations

import bisect
import sys
import time


class Progress:
    def __init__(self, instants: list[float], schedules: int, *, every: float = 5.0) -> None:
        self._instants = sorted(instants)
        self._schedules = schedules
        self._tty = sys.stderr.isatty()
        self._every = 0.0 if self._tty else every
        self._last_show = 0.0
        self._last: tuple[float, float] | None = None  # (time, unique) at the last sample

    @property
    def planned(self) -> int:
        return len(self._instants) * self._schedules

    def seconds_to_horizon(self) -> float:
        return self._instants[-1] - time.time() if self._instants else 0.0

    def seconds_to_first(self) -> float:
        return self._instants[0] - time.time() if self._instants else 0.0

    def due(self) -> int:
        """Occurrences whose instant has passed."""
        return bisect.bisect_right(self._instants, time.time()) * self._schedules

    def backlog(self, stats: dict[str, float | None]) -> int:
        return self.due() - int(stats.get("unique") or 0)

    def show(self, stats: dict[str, float | None]) -> None:
        now = time.monotonic()
        unique = float(stats.get("unique") or 0)
        rate = 0.0
        if self._last is not None and now > self._last[0]:
            rate = (unique - self._last[1]) / (now - self._last[0])
        self._last = (now, unique)
        if now - self._last_show < self._every:
            return
        self._last_show = now
        to_go = self.seconds_to_horizon()
        lag = stats.get("lag_p99_ms")
        when = (f"first fire in {self._instants[0] - time.time():.0f}s"
                if self._instants and time.time() < self._instants[0]
                else f"horizon in {to_go:.0f}s" if to_go > 0 else f"draining +{-to_go:.0f}s")
        line = (f"[loadtest] {when} | delivered {int(unique):,}/{self.planned:,} "
                f"| {rate:,.0f}/s | backlog {max(0, self.backlog(stats)):,} "
                f"| lag p99 {'-' if lag is None else f'{lag / 1000:.2f}s'}"
                f" | sink 503s {int(stats.get('failed') or 0):,}")
        if self._tty:
            sys.stderr.write("\r" + line.ljust(110))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def done(self, stats: dict[str, float | None]) -> None:
        self._every = 0.0
        self.show(stats)
        if self._tty:
            sys.stderr.write("\n")
            sys.stderr.flush()
