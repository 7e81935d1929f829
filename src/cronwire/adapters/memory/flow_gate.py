"""Flow control over a :class:`MemoryDatabase`: the claim's admission (migration 0012's
``cronwire_flow_admit``), the slots a lease holds and gives back, and a receiver's
Retry-After hold (job_run.sql's ``flow_released``), by the same rules (ADR 0040):

* a key admits, in claim order, as many runs as it has free slots (``max_concurrency``
  minus ``in_flight``) and whole tokens (refilled at ``rate_per_second`` up to
  ``burst``), and none while it is held; then the tenant's own row (key ``''``) admits
  while the tenant's ``max_concurrency`` has room;
* an expired lease re-leased keeps the slots it holds (it is not admitted again);
* every write that ends a lease gives its slots back; a 429/503's ``Retry-After`` holds
  the run's key for at most an hour (the latest hold wins).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from cronwire.adapters.memory.database import (
    RUNNABLE,
    FlowRow,
    MemoryDatabase,
    MemoryRun,
    MemorySchedule,
)
from cronwire.domain.flow_control import TENANT_KEY, default_burst
from cronwire.domain.model import RunStatus
from cronwire.domain.retry import MAX_RETRY_AFTER_SECONDS
from cronwire.domain.schedules import ScheduleSpec

KEY_SLOT, TENANT_SLOT = 1, 2  # job_run.flow_slots bits


def tokens_now(row: FlowRow, now: datetime) -> float:
    if row.rate_per_second is None or row.burst is None:
        return math.inf
    elapsed = (now - (row.tokens_at or now)).total_seconds()
    return min(float(row.burst), row.tokens + row.rate_per_second * elapsed)


def allowed(row: FlowRow, now: datetime, max_concurrency: int | None = None) -> float:
    """How many more runs the row admits now (inf: no limit)."""
    if row.held_until is not None and row.held_until > now:
        return 0
    limit = max_concurrency if max_concurrency is not None else row.max_concurrency
    slots = math.inf if limit is None else limit - row.in_flight
    tokens = tokens_now(row, now)
    return min(slots, tokens if math.isinf(tokens) else math.floor(tokens))


def sync_keys(db: MemoryDatabase, tenant_id: uuid.UUID, keys: Iterable[str | None]) -> None:
    """flow_control_sync: each key's limits are the strictest of its live schedules'; a
    new key starts with a full bucket, a smaller bucket keeps no more than it holds."""
    now = db.now()
    for key in {k for k in keys if k}:
        specs = [s.spec for s in db.schedules.values()
                 if s.tenant_id == tenant_id and s.live and s.spec.flow_key == key]
        flows = [spec.flow_control for spec in specs if spec.flow_control is not None]
        concurrency = [f.max_concurrency for f in flows if f.max_concurrency is not None]
        rates = [f for f in flows if f.rate_per_second is not None]
        burst = min((f.burst or default_burst(f.rate_per_second or 0.0) for f in rates),
                    default=None)
        row = db.flow.get((tenant_id, key))
        if row is None:
            row = db.flow[(tenant_id, key)] = FlowRow(tokens=float(burst or 0), tokens_at=now)
        elif row.rate_per_second is None:
            row.tokens = float(burst or 0)
        else:
            row.tokens = min(row.tokens, float(burst or 0))
        row.max_concurrency = min(concurrency, default=None)
        row.rate_per_second = min((f.rate_per_second or 0.0 for f in rates), default=None)
        row.burst = burst


def release_holds(db: MemoryDatabase, tenant_id: uuid.UUID, keys: Iterable[str | None]) -> None:
    for key in keys:
        row = db.flow.get((tenant_id, key)) if key else None
        if row is not None:
            row.held_until = None


def admit(db: MemoryDatabase, candidates: Sequence[MemoryRun],
          ) -> tuple[dict[uuid.UUID, int], set[uuid.UUID]]:
    """The slots each admitted candidate takes, and the candidates refused; a candidate
    that needs no slot is in neither (it is admitted as it is). Expired leases
    (``running``) are not candidates: they keep what they hold."""
    now = db.now()
    left: dict[tuple[uuid.UUID, str], float] = {}
    admitted: dict[uuid.UUID, int] = {}
    refused: set[uuid.UUID] = set()
    for run in candidates:
        if run.status is RunStatus.RUNNING:
            continue
        tenant_limit = db.tenants[run.tenant_id].max_concurrency \
            if run.tenant_id in db.tenants else None
        slots = (KEY_SLOT if run.flow_key is not None else 0) \
            | (TENANT_SLOT if tenant_limit is not None else 0)
        if not slots:
            continue
        wanted: list[tuple[tuple[uuid.UUID, str], int | None]] = []
        if slots & KEY_SLOT:
            wanted.append(((run.tenant_id, run.flow_key or ""), None))
        if slots & TENANT_SLOT:
            wanted.append(((run.tenant_id, TENANT_KEY), tenant_limit))
        for row_key, limit in wanted:
            if row_key not in left:
                row = db.flow.setdefault(row_key, FlowRow(tokens_at=now))
                left[row_key] = allowed(row, now, limit)
        if all(left[row_key] >= 1 for row_key, _ in wanted):
            for row_key, _ in wanted:
                left[row_key] -= 1
            admitted[run.id] = slots
        else:
            refused.add(run.id)
            for row_key, _ in wanted:
                db.flow[row_key].refused_at = now
    return admitted, refused


def take_slots(db: MemoryDatabase, run: MemoryRun, slots: int) -> None:
    """A new lease's slots, and the token it spends."""
    now = db.now()
    run.flow_slots = slots
    for row in _rows(db, run, slots):
        row.in_flight += 1
    if slots & KEY_SLOT:
        row = db.flow[(run.tenant_id, run.flow_key or "")]
        if row.rate_per_second is not None:
            row.tokens = tokens_now(row, now) - 1
            row.tokens_at = now


def give_back(db: MemoryDatabase, run: MemoryRun, hold_seconds: float | None = None) -> None:
    """The slots of a lease that ended, and the key's hold a Retry-After asked for."""
    for row in _rows(db, run, run.flow_slots):
        row.in_flight = max(row.in_flight - 1, 0)
    run.flow_slots = 0
    if hold_seconds is None or run.flow_key is None:
        return
    held = db.flow.get((run.tenant_id, run.flow_key))
    if held is None:
        return
    now = db.now()
    until = now + timedelta(seconds=min(max(hold_seconds, 0.0), MAX_RETRY_AFTER_SECONDS))
    held.held_until = max(held.held_until or now, until)


def _rows(db: MemoryDatabase, run: MemoryRun, slots: int) -> list[FlowRow]:
    rows = []
    if slots & KEY_SLOT and (run.tenant_id, run.flow_key or "") in db.flow:
        rows.append(db.flow[(run.tenant_id, run.flow_key or "")])
    if slots & TENANT_SLOT and (run.tenant_id, TENANT_KEY) in db.flow:
        rows.append(db.flow[(run.tenant_id, TENANT_KEY)])
    return rows


def save_flow_control(db: MemoryDatabase, schedule: MemorySchedule,
                       previous: ScheduleSpec) -> None:
    """flow_store.save_flow_control's rules: runs not started move to the new key, an
    edited flow control ends the old key's hold, both keys' limits are recomputed."""
    key, old = schedule.spec.flow_key, previous.flow_key
    if old is not None and old != key:
        for run in db.runs.values():
            if run.schedule_id == schedule.id and run.status in RUNNABLE:
                run.flow_key = key
                run.version += 1
    if old is not None and (old != key or previous.flow_control != schedule.spec.flow_control):
        release_holds(db, schedule.tenant_id, [old])
    sync_keys(db, schedule.tenant_id, [key, old])
