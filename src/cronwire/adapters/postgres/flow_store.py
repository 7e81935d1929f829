"""Flow control on Postgres, the API's side (queries/flow_control.sql): a schedule's key
and limits, written in the transaction that creates, edits or deletes it, and what the
tenant and the gauge see. The claim's side lives in the claim statements (job_run.sql)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.flow_control import FlowKeyState, flow_to_document
from cronwire.domain.schedules import ScheduleSpec

Q = queries()


async def save_flow_control(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
    spec: ScheduleSpec, previous: ScheduleSpec | None = None,
) -> None:
    """The schedule's flow_control and key, and the limits of its key and of the key it
    left (``previous``: the schedule before an edit), in the caller's transaction.

    An edit of the flow control releases what the old settings held: the schedule's runs
    not started yet move to the new key, and a receiver's hold on the old key ends."""
    key = spec.flow_key
    previous_key = previous.flow_key if previous is not None else None
    edited = previous is not None and previous.flow_control != spec.flow_control
    if key is None and previous_key is None:
        return
    await conn.execute(Q["flow_control_set_schedule"], tenant_id, schedule_id,
                       flow_to_document(spec.flow_control), key)
    if previous_key is not None and previous_key != key:
        await conn.execute(Q["flow_control_rekey_runs"], tenant_id, schedule_id,
                           previous_key, key)
    if previous_key is not None and (previous_key != key or edited):
        await conn.execute(Q["flow_control_release_holds"], tenant_id, [previous_key])
    await sync_keys(conn, tenant_id, [k for k in {key, previous_key} if k is not None])


async def sync_keys(conn: asyncpg.Connection, tenant_id: uuid.UUID, keys: Sequence[str]) -> None:
    if keys:
        await conn.execute(Q["flow_control_sync"], tenant_id, sorted(keys))


async def resync_deleted(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                         schedule_id: uuid.UUID) -> None:
    """After a delete: the key's limits without the deleted schedule's, and no hold left
    on it (the delete cancelled the schedule's waiting runs; the others start again)."""
    key = await conn.fetchval(Q["flow_control_key_of"], tenant_id, schedule_id)
    if key is not None:
        await conn.execute(Q["flow_control_release_holds"], tenant_id, [key])
        await sync_keys(conn, tenant_id, [key])


class PostgresFlowControl:
    """What ``GET /v1/flow-control`` reads (the FlowControlView port)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def keys(self, tenant_id: uuid.UUID, limit: int,
                   key: str | None = None) -> list[FlowKeyState]:
        with storage_errors("listing flow-control keys"):
            rows = await self._pool.fetch(Q["flow_control_list"], tenant_id, limit, key)
        return [FlowKeyState(key=r["key"], max_concurrency=r["max_concurrency"],
                             rate_per_second=r["rate_per_second"], in_flight=r["in_flight"],
                             waiting=r["waiting"], held_until=r["held_until"])
                for r in rows]
