"""Sealing what was stored before sealing began (ADR 0061). A migration cannot do it: the
key ring never reaches the database. So every replica runs this after migrating: in
batches (one transaction each, rows locked until their sealed values are written), by
id, so it ends even while old replicas still write clear values; idempotent (only values
not in the sealed format are read) and resumable (a restart finds what is left)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sealed_fields import sealed_target
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.secrets import alert_secret_context, is_sealed, schedule_secret_context
from cronwire.ports.secrets import SecretBox

Q = queries()
NIL_ID = uuid.UUID(int=0)
BATCH = 500


async def _sealed_or_none(box: SecretBox, tenant_id: uuid.UUID, value: str | None,
                          context: str) -> str | None:
    if value is None or is_sealed(value):
        return value
    return await box.seal(tenant_id, value, context)


class PostgresSealingPass:
    def __init__(self, pool: asyncpg.Pool, box: SecretBox, batch: int = BATCH) -> None:
        self._pool = pool
        self._box = box
        self._batch = batch

    async def run(self) -> int:
        """Seal every value not sealed yet; how many rows were sealed."""
        return await self._schedules() + await self._alert_destinations()

    async def _schedules(self) -> int:
        after, sealed = NIL_ID, 0
        while True:
            with storage_errors("sealing stored schedules"):
                async with self._pool.acquire() as conn, conn.transaction():
                    rows = await conn.fetch(Q["schedule_unsealed_lock"], after, self._batch)
                    if not rows:
                        return sealed
                    columns: list[list[Any]] = [[], [], [], []]
                    for row in rows:
                        for column, value in zip(columns, await self._schedule(row),
                                                 strict=True):
                            column.append(value)
                    await conn.execute(Q["schedule_seal"], *columns)
            sealed += len(rows)
            after = rows[-1]["id"]

    async def _schedule(self, row: asyncpg.Record) -> tuple[Any, ...]:
        tenant_id, schedule_id = row["tenant_id"], row["id"]
        document = json.loads(row["target_json"]) if row["target_json"] else {}
        headers = document.get("headers") if isinstance(document, dict) else None
        if isinstance(headers, dict):
            kept = {name: value for name, value in headers.items()
                    if isinstance(value, str) and is_sealed(value)}
            fresh = await sealed_target(
                self._box, tenant_id, schedule_id,
                {"headers": {n: v for n, v in headers.items() if n not in kept}})
            document["headers"] = {**fresh["headers"], **kept}
        context = schedule_secret_context(schedule_id)
        return (schedule_id, json.dumps(document),
                await _sealed_or_none(self._box, tenant_id, row["signing_secret"], context),
                await _sealed_or_none(self._box, tenant_id, row["previous_signing_secret"],
                                      context))

    async def _alert_destinations(self) -> int:
        after, sealed = NIL_ID, 0
        while True:
            with storage_errors("sealing stored alert destinations"):
                async with self._pool.acquire() as conn, conn.transaction():
                    rows = await conn.fetch(Q["tenant_alert_destination_unsealed_lock"],
                                            after, self._batch)
                    if not rows:
                        return sealed
                    secrets = [await self._box.seal(row["tenant_id"], row["signing_secret"],
                                                    alert_secret_context()) for row in rows]
                    await conn.execute(Q["tenant_alert_destination_seal"],
                                       [row["tenant_id"] for row in rows], secrets)
            sealed += len(rows)
            after = rows[-1]["tenant_id"]

