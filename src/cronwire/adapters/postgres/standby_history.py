"""RunHistory that reads from a hot standby while its data is fresh enough
(SCHEDULER_READ_MAX_LAG_SECONDS) and from the primary otherwise: when the standby lags,
is down, or has not replayed a run yet. It only reads; writes and claims never come here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from cronwire.adapters.postgres.run_history import PostgresRunHistory
from cronwire.adapters.postgres.standby_freshness import StandbyFreshness
from cronwire.domain.errors import NotFound, StorageError
from cronwire.domain.history import RunDetail, RunQuery, RunView

STANDBY, PRIMARY = "standby", "primary"


def _ignore(_server: str) -> None:
    return None


class StandbyRunHistory:
    def __init__(self, primary: PostgresRunHistory, standby: PostgresRunHistory,
                 freshness: StandbyFreshness,
                 on_read: Callable[[str], None] = _ignore) -> None:
        self._primary = primary
        self._standby = standby
        self._fresh = freshness
        self._on_read = on_read  # which server answered (scheduler_history_reads_total)

    async def list(self, tenant_id: uuid.UUID, query: RunQuery) -> Sequence[RunView]:
        if await self._fresh.standby_may_serve():
            try:
                page = await self._standby.list(tenant_id, query)
            except StorageError:
                self._fresh.standby_failed()
            else:
                self._on_read(STANDBY)
                return page
        self._on_read(PRIMARY)
        return await self._primary.list(tenant_id, query)

    async def get(self, tenant_id: uuid.UUID, run_id: uuid.UUID) -> RunDetail:
        if await self._fresh.standby_may_serve():
            try:
                detail = await self._standby.get(tenant_id, run_id)
            except StorageError:
                self._fresh.standby_failed()
            except NotFound:
                pass  # a run younger than the standby's data: the primary may know it
            else:
                self._on_read(STANDBY)
                return detail
        self._on_read(PRIMARY)
        return await self._primary.get(tenant_id, run_id)
