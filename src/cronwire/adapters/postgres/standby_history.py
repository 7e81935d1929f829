"""Reads that go to a hot standby while its data is fresh enough
(SCHEDULER_READ_MAX_LAG_SECONDS) and to the primary otherwise: when the standby lags, is
down, or has not replayed a run yet. The run history and the schedule stats both read
this way; writes and claims never come here.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TypeVar

from cronwire.adapters.postgres.run_history import PostgresRunHistory
from cronwire.adapters.postgres.schedule_stats import PostgresStatsReader
from cronwire.adapters.postgres.standby_freshness import StandbyFreshness
from cronwire.domain.errors import NotFound, StorageError
from cronwire.domain.history import RunDetail, RunQuery, RunView
from cronwire.domain.stats import ScheduleStats

STANDBY, PRIMARY = "standby", "primary"
T = TypeVar("T")


def _ignore(_server: str) -> None:
    return None


class StandbyFirst:
    """Runs one read on the standby when it may serve, else (or when it fails) on the
    primary, and tells ``on_read`` which server answered (scheduler_history_reads_total)."""

    def __init__(self, freshness: StandbyFreshness,
                 on_read: Callable[[str], None] = _ignore) -> None:
        self._fresh = freshness
        self._on_read = on_read

    async def read(self, on_standby: Callable[[], Awaitable[T]],
                   on_primary: Callable[[], Awaitable[T]]) -> T:
        if await self._fresh.standby_may_serve():
            try:
                answer = await on_standby()
            except StorageError:
                self._fresh.standby_failed()
            except NotFound:
                pass  # younger than the standby's data: the primary may know it
            else:
                self._on_read(STANDBY)
                return answer
        self._on_read(PRIMARY)
        return await on_primary()


class StandbyRunHistory:
    def __init__(self, primary: PostgresRunHistory, standby: PostgresRunHistory,
                 freshness: StandbyFreshness,
                 on_read: Callable[[str], None] = _ignore) -> None:
        self._primary = primary
        self._standby = standby
        self._first = StandbyFirst(freshness, on_read)

    async def list(self, tenant_id: uuid.UUID, query: RunQuery) -> Sequence[RunView]:
        return await self._first.read(lambda: self._standby.list(tenant_id, query),
                                      lambda: self._primary.list(tenant_id, query))

    async def get(self, tenant_id: uuid.UUID, run_id: uuid.UUID) -> RunDetail:
        return await self._first.read(lambda: self._standby.get(tenant_id, run_id),
                                      lambda: self._primary.get(tenant_id, run_id))


class StandbyStatsReader:
    def __init__(self, primary: PostgresStatsReader, standby: PostgresStatsReader,
                 freshness: StandbyFreshness,
                 on_read: Callable[[str], None] = _ignore) -> None:
        self._primary = primary
        self._standby = standby
        self._first = StandbyFirst(freshness, on_read)

    async def schedule_stats(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                             window: str, window_seconds: int) -> ScheduleStats:
        return await self._first.read(
            lambda: self._standby.schedule_stats(tenant_id, schedule_id, window,
                                                 window_seconds),
            lambda: self._primary.schedule_stats(tenant_id, schedule_id, window,
                                                 window_seconds))

    async def retained_since(self) -> datetime | None:
        return await self._first.read(self._standby.retained_since,
                                      self._primary.retained_since)
