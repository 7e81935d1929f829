"""A tenant's runs not yet ended, read where a request is about to add some (backfill,
replay, trigger), under the tenant's volume lock (queries/tenant.sql: tenant_lock_volume).

The lock is transaction-scoped: it is released by the commit that makes the new runs
visible, so the next request of the tenant, on any replica, counts them.
"""

from __future__ import annotations

import hashlib
import uuid

import asyncpg

from cronwire.adapters.postgres.sql import queries
from cronwire.domain.errors import NotFound
from cronwire.domain.volume import OpenRuns

Q = queries()
# The first key of the two-integer advisory lock: the first 4 bytes of
# sha256("cronwire.tenant-volume"), fixed forever.
VOLUME_LOCK_CLASS = int.from_bytes(
    hashlib.sha256(b"cronwire.tenant-volume").digest()[:4], "big", signed=True)


async def locked_open_runs(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                           default_limit: int) -> OpenRuns:
    """Take the tenant's volume lock (inside ``conn``'s transaction), then count."""
    await conn.execute(Q["tenant_lock_volume"], tenant_id, VOLUME_LOCK_CLASS)
    return await _count(conn, tenant_id, default_limit)


async def open_runs(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                    default_limit: int) -> OpenRuns:
    """The tenant's runs not yet ended, up to its limit (no lock: a dry run's estimate).
    Inside a transaction (the plan setting is transaction-local)."""
    await conn.execute(Q["tenant_count_plan"])
    return await _count(conn, tenant_id, default_limit)


async def _count(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                 default_limit: int) -> OpenRuns:
    row = await conn.fetchrow(Q["tenant_open_runs"], tenant_id, default_limit)
    if row is None:
        raise NotFound(f"tenant {tenant_id} not found")
    return OpenRuns(counted=row["counted"], limit=row["max_pending_runs"], own=row["own"])
