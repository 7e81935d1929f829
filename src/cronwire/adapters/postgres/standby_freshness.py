"""Whether a hot standby is fresh enough to serve a read: it has replayed everything the
primary had written ``max_lag`` seconds ago (ADR 0039).

The primary's WAL insert position is sampled now and then, each sample with the instant
just before it was asked for; the standby reports how far it has replayed. The newest
sample the standby has passed is the age of its data: everything committed before that
instant is visible there. So a verdict holds until that instant + ``max_lag``, and until
then reads go to the standby with no check at all. An idle primary is no problem (its
position does not move, the standby reaches it), nor a standby cut off from its primary
(the primary moves on without it: a delay in replay and a cut look the same, as they
should). Time is the replica's monotonic clock only: two readings of it, never compared
with the database's.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

import asyncpg

from cronwire.adapters.postgres.driver_errors import DRIVER_ERRORS
from cronwire.adapters.postgres.sql import queries

Q = queries()
CHECK_TIMEOUT_SECONDS = 2.0  # one position query; slower than that is as good as down
DOWN_SECONDS = 1.0  # after a standby failed, the primary serves this long before a retry


class StandbyFreshness:
    def __init__(self, primary: asyncpg.Pool, standby: asyncpg.Pool, max_lag_seconds: float,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._primary = primary
        self._standby = standby
        self._max_lag = max_lag_seconds
        self._now = monotonic
        self._samples: deque[tuple[float, int]] = deque()  # (asked at, primary position)
        self._fresh_until = float("-inf")  # the standby serves until then, unchecked
        self._next_check = float("-inf")  # after a "no", the primary serves until then
        self._checking = asyncio.Lock()

    def standby_failed(self) -> None:
        """A read on the standby failed: the primary serves for a while."""
        self._fresh_until = float("-inf")
        self._next_check = self._now() + DOWN_SECONDS

    async def standby_may_serve(self) -> bool:
        """True while the standby's data is at most ``max_lag`` seconds old. Never raises:
        whatever cannot be known (primary or standby away) answers False."""
        if self._now() < self._fresh_until:
            return True
        async with self._checking:  # concurrent reads share one check
            now = self._now()
            if now < self._fresh_until:
                return True
            if now < self._next_check:
                return False
            try:
                await self._sample_primary(now)
            except DRIVER_ERRORS:
                return False  # no bound without the primary; it serves (or fails) alone
            try:
                position = await self._standby.fetchval(
                    Q["database_wal_position"], timeout=CHECK_TIMEOUT_SECONDS)
            except DRIVER_ERRORS:
                self.standby_failed()
                return False
            passed = [at for at, lsn in self._samples if position is not None and lsn <= position]
            self._fresh_until = max(passed) + self._max_lag if passed else float("-inf")
            # Behind: the samples taken meanwhile give the standby more to catch up with.
            self._next_check = now + self._max_lag / 4
            return now < self._fresh_until

    async def _sample_primary(self, now: float) -> None:
        while self._samples and self._samples[0][0] < now - self._max_lag:
            self._samples.popleft()  # too old to make any read fresh enough
        if self._samples and self._samples[-1][0] > now - self._max_lag / 4:
            return
        asked_at = self._now()
        position = await self._primary.fetchval(
            Q["database_wal_position"], timeout=CHECK_TIMEOUT_SECONDS)
        self._samples.append((asked_at, int(position)))
