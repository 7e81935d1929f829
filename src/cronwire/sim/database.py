"""The simulated database: the memory adapters' tables on the virtual clock.

The database's clock is the loop's virtual time (a replica's clock may jump; this one
never does). Seeding writes tenants and schedules with ids drawn from the seed, since the
memory adapters' own seeding helpers draw random ones.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from cronwire.adapters.memory import MemoryClock, MemoryDatabase, MemoryRun
from cronwire.adapters.memory.database import MemorySchedule, MemoryTenant
from cronwire.adapters.memory.flow_gate import sync_keys
from cronwire.domain.model import RunStatus, Target, Trigger
from cronwire.domain.schedule_rules import first_fire
from cronwire.domain.schedules import ScheduleSpec
from cronwire.sim.scenario import Scenario

RECEIVER_URL = "https://receiver-{index}.sim.invalid/hook"


class VirtualClock(MemoryClock):
    """Postgres ``now()``: ``start`` plus the loop's virtual time (plus what ``advance``
    added: the manual-trigger path moves the clock a microsecond between tries)."""

    def __init__(self, start: datetime, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(start, frozen=True)
        self._loop = loop

    def monotonic(self) -> float:
        return self._loop.time() + self._offset


class SimDatabase(MemoryDatabase):
    """A :class:`MemoryDatabase` that counts the runs of every occurrence as they are
    inserted (the checker's "exactly one run per occurrence" needs no scan), and can lose
    its unique-occurrence guard (a mutation the test suite puts back)."""

    def __init__(self, clock: VirtualClock, rng: random.Random) -> None:
        super().__init__(clock=clock)
        self.unique_guard = True
        self.per_occurrence: dict[tuple[uuid.UUID, datetime], int] = {}
        self.on_insert: Callable[[uuid.UUID, datetime], None] | None = None
        self._rng = rng

    def insert_run(self, schedule_id: uuid.UUID, scheduled_for: datetime, *,
                   fire_after: datetime | None = None, status: RunStatus = RunStatus.PENDING,
                   trigger: Trigger = Trigger.SCHEDULE, run_id: uuid.UUID | None = None,
                   **rest: object) -> MemoryRun | None:
        if not self.unique_guard:
            self._occurrences.discard((schedule_id, scheduled_for))
            if run_id is None or (run_id, scheduled_for) in self.runs:
                run_id = uuid.UUID(int=self._rng.getrandbits(128), version=4)
        run = super().insert_run(schedule_id, scheduled_for, fire_after=fire_after,
                                 status=status, trigger=trigger, run_id=run_id,
                                 **rest)  # type: ignore[arg-type]
        if run is not None:
            key = (schedule_id, scheduled_for)
            self.per_occurrence[key] = self.per_occurrence.get(key, 0) + 1
            if self.on_insert is not None:
                self.on_insert(schedule_id, scheduled_for)
        return run


def seeded_uuid(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


def seed_world(db: SimDatabase, scenario: Scenario, rng: random.Random) -> list[uuid.UUID]:
    """The scenario's tenants and schedules, active from now; their ids in order."""
    now = db.now()
    tenants = []
    for t in range(max(s.tenant for s in scenario.schedules) + 1):
        tenant = MemoryTenant(seeded_uuid(rng), f"tenant-{t}")
        db.tenants[tenant.id] = tenant
        tenants.append(tenant.id)
    ids = []
    for s in scenario.schedules:
        spec = ScheduleSpec(
            name=f"sim-{s.index}", cron=s.cron, timezone="UTC",
            target=Target(url=RECEIVER_URL.format(index=s.index)), retry=s.retry,
            overlap_policy=s.policy, jitter_seconds=s.jitter, flow_control=s.flow,
        )
        schedule = MemorySchedule(
            id=seeded_uuid(rng), tenant_id=tenants[s.tenant], spec=spec,
            signing_secret="whsec_" + "S" * 32, created_at=now, updated_at=now,
            next_fire_at=first_fire(spec, now + timedelta(seconds=1)),
        )
        db.schedules[schedule.id] = schedule
        ids.append(schedule.id)
    for tenant_id in tenants:  # the keys' limits, as the API's creates leave them
        sync_keys(db, tenant_id, [db.schedules[i].spec.flow_key for i in ids
                                  if db.schedules[i].tenant_id == tenant_id])
    return ids
