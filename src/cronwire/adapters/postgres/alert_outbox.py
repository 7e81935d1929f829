"""Alerts on Postgres, the dispatcher's side (AlertOutbox): the late check, claiming
due events with a lease, and recording each attempt (queries/alert_event.sql)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import asyncpg

from cronwire.adapters.postgres.alert_store import event_of
from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.alerts import AlertResolution, ClaimedAlert
from cronwire.domain.secrets import SecretError, alert_secret_context
from cronwire.ports.secrets import SecretBox

Q = queries()
log = logging.getLogger(__name__)


class PostgresAlertOutbox:
    def __init__(self, pool: asyncpg.Pool, box: SecretBox) -> None:
        self._pool = pool
        self._box = box

    async def check_late(self, horizon_seconds: float) -> int:
        with storage_errors("checking late schedules"):
            rows = await self._pool.fetch(Q["alert_event_insert_late"], horizon_seconds)
        return len(rows)

    async def tell_untold_failing(self) -> int:
        with storage_errors("telling damped failing schedules"):
            rows = await self._pool.fetch(Q["alert_event_insert_untold_failing"])
        return len(rows)

    async def claim(self, owner: str, limit: int, lease_seconds: float,
                    tenant_in_flight: int) -> Sequence[ClaimedAlert]:
        with storage_errors("claiming alert events"):
            async with self._pool.acquire() as conn:
                await conn.execute(Q["alert_event_fail_abandoned"])
                rows = await conn.fetch(Q["alert_event_claim"], owner, limit, lease_seconds,
                                        tenant_in_flight)
        return [ClaimedAlert(event_of(row), row["url"], await self._secret(row),
                             row["lease_generation"]) for row in rows]

    async def _secret(self, row: asyncpg.Record) -> str | None:
        sealed: str | None = row["signing_secret"]
        if sealed is None:
            return None
        try:
            return await self._box.unseal(row["tenant_id"], sealed, alert_secret_context())
        except SecretError as exc:  # sent unsigned never: the dispatcher fails it instead
            log.error("alert event %s: the destination's secret does not open: %s",
                      row["id"], exc)
            return None

    async def resolve(self, owner: str, resolution: AlertResolution) -> bool:
        a = resolution.attempt
        with storage_errors("recording an alert delivery"):
            row = await self._pool.fetchrow(
                Q["alert_event_resolve"], owner, resolution.event_id,
                resolution.lease_generation, resolution.status, resolution.retry_delay_seconds,
                a.status_code if a else None, a.error if a else None,
                a.started_at if a else None, a.finished_at if a else None,
                a.outcome if a else None, a.duration_ms if a else None,
                a.response_excerpt if a else None)
        return row is not None
