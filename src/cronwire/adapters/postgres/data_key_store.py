"""DataKeyStore on Postgres (queries/secret_data_key.sql): wrapped data keys, one per tenant."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries, rows_affected
from cronwire.domain.errors import StorageError
from cronwire.domain.secrets import DataKeyRecord

Q = queries()
NIL_ID = uuid.UUID(int=0)


def _record(row: asyncpg.Record) -> DataKeyRecord:
    return DataKeyRecord(row["id"], row["tenant_id"], row["key_id"], bytes(row["wrapped"]))


class PostgresDataKeyStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def for_tenants(self, tenant_ids: Collection[uuid.UUID]) -> Sequence[DataKeyRecord]:
        with storage_errors("reading data keys"):
            rows = await self._pool.fetch(Q["secret_data_key_for_tenants"], list(tenant_ids))
        return [_record(row) for row in rows]

    async def insert_if_absent(self, record: DataKeyRecord) -> DataKeyRecord:
        with storage_errors("storing a data key"):
            row = await self._pool.fetchrow(Q["secret_data_key_insert"], record.id,
                                            record.tenant_id, record.key_id, record.wrapped)
            if row is None:
                # Another replica's insert committed while ours waited on it: ON CONFLICT
                # did nothing, and the statement's snapshot predates that row. A new
                # statement sees it (two apply requests of a new tenant at once did this).
                rows = await self._pool.fetch(Q["secret_data_key_for_tenants"],
                                              [record.tenant_id])
                if not rows:
                    raise StorageError(f"the data key of tenant {record.tenant_id} "
                                       "vanished while it was stored")
                row = rows[0]
        return _record(row)

    async def count_by_key_id(self) -> Mapping[str, int]:
        with storage_errors("counting data keys"):
            rows = await self._pool.fetch(Q["secret_data_key_count_by_key_id"])
        return {row["key_id"]: row["data_keys"] for row in rows}

    async def not_wrapped_by(self, key_id: str, after: uuid.UUID | None,
                             limit: int) -> Sequence[DataKeyRecord]:
        with storage_errors("reading data keys to re-wrap"):
            rows = await self._pool.fetch(Q["secret_data_key_not_wrapped_by"], key_id,
                                          after or NIL_ID, limit)
        return [_record(row) for row in rows]

    async def rewrap(self, rewrapped: Sequence[tuple[DataKeyRecord, DataKeyRecord]]) -> int:
        if not rewrapped:
            return 0
        with storage_errors("re-wrapping data keys"):
            status = await self._pool.execute(
                Q["secret_data_key_rewrap"], [old.id for old, _ in rewrapped],
                [old.key_id for old, _ in rewrapped], [new.key_id for _, new in rewrapped],
                [new.wrapped for _, new in rewrapped])
        return rows_affected(status)

    async def one_per_key_id(self) -> Sequence[DataKeyRecord]:
        with storage_errors("reading data keys"):
            rows = await self._pool.fetch(Q["secret_data_key_one_per_key_id"])
        return [_record(row) for row in rows]
