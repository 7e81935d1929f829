"""The tenant API's rate limit (``SCHEDULER_API_RATE_PER_SECOND``): a token bucket per
tenant, refilled at ``rate`` tokens a second up to ``burst``; a request takes one token or
is refused with the whole seconds until one is there.

Buckets live in one replica's memory: the limit holds per replica (a fleet of N replicas
behind a balancer lets a tenant through at up to N times it). Memory stays bounded however
many tenants call: a bucket idle long enough to be full again says nothing a new bucket
would not, so it is dropped (least recently used first, checked on every request), and
past ``max_tracked`` buckets the least recently used one is dropped even if not yet full
(that tenant gets a fresh burst: a small loss, where unbounded growth is not one).
Pure: the caller passes the monotonic clock reading.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

LIMIT = "api_rate_per_second"
SETTING = "SCHEDULER_API_RATE_PER_SECOND"
DEFAULT_RATE_PER_SECOND = 50.0
BURST_FACTOR = 2.0
MAX_TRACKED = 50_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float  # the clock reading ``tokens`` was counted at


class TenantRateLimit:
    def __init__(self, rate_per_second: float, *, max_tracked: int = MAX_TRACKED) -> None:
        if not (rate_per_second > 0 and math.isfinite(rate_per_second)):
            raise ValueError(f"rate_per_second: must be a finite number > 0, got {rate_per_second}")
        self.rate = rate_per_second
        # At least one token, or a rate under 0.5/s would admit nothing at all.
        self.burst = max(1.0, BURST_FACTOR * rate_per_second)
        self._max_tracked = max_tracked
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        """Buckets held now (what bounds this object's memory)."""
        return len(self._buckets)

    def _level(self, bucket: _Bucket, now: float) -> float:
        return min(self.burst, bucket.tokens + max(0.0, now - bucket.at) * self.rate)

    def take(self, key: Hashable, now: float) -> int:
        """Take one token of ``key``'s bucket: 0 if it was there, else the whole seconds
        (at least 1) until one will be (nothing is taken then)."""
        self._drop_idle(now)
        bucket = self._buckets.pop(key, None)
        level = self.burst if bucket is None else self._level(bucket, now)
        if level >= 1.0:
            self._buckets[key] = _Bucket(level - 1.0, now)
            return 0
        self._buckets[key] = _Bucket(level, now)
        return max(1, math.ceil((1.0 - level) / self.rate))

    def _drop_idle(self, now: float) -> None:
        while self._buckets:
            key, oldest = next(iter(self._buckets.items()))
            if len(self._buckets) < self._max_tracked and self._level(oldest, now) < self.burst:
                return
            del self._buckets[key]

    def refusal(self, wait_seconds: int) -> str:
        """The message of a refusal, naming the limit and its value."""
        return (f"{LIMIT}: more than {self.rate:g} requests per second (burst {self.burst:g}) "
                f"from this tenant ({SETTING}, per replica); retry after {wait_seconds} s")
