"""The latest occurrences before an instant: the planner keeps the most recent missed
occurrences (fire_once's one run, the skipped rows it records), and cron maths only walks
forward, so the walk looks back through growing windows."""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta

from cronwire.domain.calendar_walk import effective_between
from cronwire.domain.model import DueSchedule

# Windows of 1 s, 4 s, 16 s, ... before the bound, each walked in pages of _PROBE_PAGE.
_PROBE_FIRST = timedelta(seconds=1)
_PROBE_GROWTH = 4
_PROBE_PAGE = 4096
_TICK = timedelta(microseconds=1)


def last_occurrences(s: DueSchedule, lo: datetime, hi: datetime, count: int) -> list[datetime]:
    """The last ``count`` occurrences in ``[lo, hi)``, oldest first.

    Cron maths only walks forward, so look back through growing windows before ``hi``
    until one holds ``count`` occurrences (or reaches ``lo``), then walk that window,
    keeping its tail. Every window before the last one held fewer than ``count``, so the
    work stays near ``count`` times the growth factor for regular schedules.
    """
    if hi <= lo:
        return []
    if s.cron is None:
        return [s.at] if s.at is not None and lo <= s.at < hi and count > 0 else []
    span = _PROBE_FIRST
    while True:
        start = lo if span >= hi - lo else hi - span  # never computes a date before lo
        kept = _walk_tail(s, start, hi, count)
        if len(kept) >= count or start == lo:
            return kept
        span *= _PROBE_GROWTH


def _walk_tail(s: DueSchedule, lo: datetime, hi: datetime, count: int) -> list[datetime]:
    """Every occurrence in ``[lo, hi)`` walked page by page, the last ``count`` kept."""
    kept: deque[datetime] = deque(maxlen=count)
    after = lo - _TICK
    last = hi - _TICK
    assert s.cron is not None  # last_occurrences answers one-time schedules itself
    while True:
        page = effective_between(s.cron, s.timezone, after, last, _PROBE_PAGE, s.exclusions)
        kept.extend(page)
        if len(page) < _PROBE_PAGE:
            return list(kept)
        after = page[-1]
