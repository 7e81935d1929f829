"""What every change to a schedule writes besides itself, in its transaction (ADR 0056):
the If-Match check against the locked row, then, only if the diff is not empty, the next
version, the revision (the definition as of that version, header values sealed as in the
row) and the audit row. A change that changes nothing writes none of them, so a caller
that re-applies the same definition (a PUT by key) gets no new version."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import asyncpg

from cronwire.adapters.postgres.audit_log import write_audit
from cronwire.adapters.postgres.sealed_fields import opened_stored_target
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.access import Change
from cronwire.domain.audit import AuditEntry, Changes, Revision, diff
from cronwire.domain.errors import NotFound, VersionMismatch
from cronwire.domain.schedule_definition import (
    schedule_fields,
    spec_definition,
    spec_from_definition,
)
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec
from cronwire.ports.secrets import SecretBox

Q = queries()
MAX_REVISIONS = 1000


def check_version(row: Mapping[str, Any], if_match: int | None) -> None:
    """VersionMismatch when ``if_match`` names another version than the locked row's."""
    if if_match is not None and row["version"] != if_match:
        raise VersionMismatch(f"schedule {row['id']}", if_match, row["version"])


async def record_change(
    conn: asyncpg.Connection, change: Change, action: str,
    before: ScheduleRecord | None, after: ScheduleRecord, stored_target: Mapping[str, Any],
    *, also: Changes | None = None,
) -> int | None:
    """The new version after ``before`` became ``after`` (both in clear; ``before`` None
    for a create, which is version 1), with its revision and audit row; None, and nothing
    written, when nothing differs. ``stored_target`` is the target document as the row
    holds it (header values sealed); ``also`` adds changes the fields do not show (a
    rotated secret)."""
    changes = {**diff(schedule_fields(before) if before else None, schedule_fields(after)),
               **(also or {})}
    if not changes:
        return None
    tenant_id, schedule_id = after.tenant_id, after.id
    version = 1
    if before is not None:
        version = await conn.fetchval(Q["schedule_bump_version"], tenant_id, schedule_id)
    definition = {**spec_definition(after.spec), "target": dict(stored_target)}
    await conn.execute(Q["schedule_revision_insert"], tenant_id, schedule_id, version,
                       change.actor.as_document(), action, changes, definition)
    await write_audit(conn, tenant_id, AuditEntry(change, action, "schedule",
                                                  str(schedule_id), changes))
    return int(version)


async def audit_schedule(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                         schedule_id: uuid.UUID, change: Change, action: str,
                         changes: Changes) -> None:
    """An audit row for a change that makes no new version (delete, trigger, backfill)."""
    await write_audit(conn, tenant_id, AuditEntry(change, action, "schedule",
                                                  str(schedule_id), changes))


async def revisions(pool: asyncpg.Pool, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                    limit: int) -> list[Revision]:
    rows = await pool.fetch(Q["schedule_revision_list"], tenant_id, schedule_id,
                            min(limit, MAX_REVISIONS))
    return [Revision(r["version"], r["at"], r["actor"], r["changes"]) for r in rows]


async def revision_spec(conn: asyncpg.Connection, box: SecretBox, current: ScheduleRecord,
                        version: int) -> ScheduleSpec:
    """The definition ``current`` had at ``version``, header values opened; NotFound for
    a version it never had (or one past retention)."""
    row = await conn.fetchrow(Q["schedule_revision_get"], current.tenant_id, current.id,
                              version)
    if row is None:
        raise NotFound(f"schedule {current.id} has no version {version}")
    spec = spec_from_definition(row["definition"])
    target = await opened_stored_target(box, current.tenant_id, current.id, spec.target)
    return replace(spec, target=target)
