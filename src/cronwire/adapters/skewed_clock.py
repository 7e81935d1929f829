"""A replica clock set off by a fixed offset, for fault injection (``cronwire chaos``).

Read only from ``CRONWIRE_CHAOS_CLOCK_SKEW_SECONDS``, deliberately outside the
``SCHEDULER_`` settings: it is a test knob, never something to configure in production.
Only the wall clock moves; durations (``monotonic``) stay true, as on a host whose NTP is
wrong but whose tick is not.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from cronwire.adapters.clock import SystemClock
from cronwire.domain.errors import ConfigError

SKEW_VARIABLE = "CRONWIRE_CHAOS_CLOCK_SKEW_SECONDS"


class SkewedClock:
    def __init__(self, skew_seconds: float) -> None:
        self._skew = timedelta(seconds=skew_seconds)

    def now(self) -> datetime:
        return datetime.now(UTC) + self._skew

    def monotonic(self) -> float:
        return time.monotonic()


def replica_clock(environ: Mapping[str, str] | None = None) -> SystemClock | SkewedClock:
    """The system clock, or a skewed one when the chaos variable is set."""
    raw = (os.environ if environ is None else environ).get(SKEW_VARIABLE, "").strip()
    if not raw:
        return SystemClock()
    try:
        skew = float(raw)
    except ValueError:
        raise ConfigError(f"{SKEW_VARIABLE}: expected a number of seconds, got {raw!r}") from None
    if not math.isfinite(skew) or abs(skew) > 86_400:
        raise ConfigError(f"{SKEW_VARIABLE}: must be within +/-86400 seconds, got {raw!r}")
    return SkewedClock(skew)
