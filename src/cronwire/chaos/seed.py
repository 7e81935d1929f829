"""What a chaos scenario fires: schedules firing every second from the first instant
after the lead time for ``duration`` seconds, and, for the fairness fault, one tenant's
burst of runs due at once. The harness knows from the cron maths which runs must be
delivered (the planned run ids); the receiver's records say which were."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from cronwire.chaos.plan import ChaosPlan
from cronwire.chaos.scenario import FaultSpec, Groups
from cronwire.domain.cron import occurrences_between
from cronwire.domain.documents import retry_to_document, target_to_document
from cronwire.domain.model import RetryPolicy, Target, run_id_for
from cronwire.harness.seeding import (
    db_now,
    seed_due_run_ids,
    seed_firing_schedules,
    seed_schedule,
)

CRON_EVERY_SECOND = "* * * * * *"
LEAD_SECONDS = 3.0  # first fire this long after the schedules are written
RETRY = retry_to_document(RetryPolicy(5, 1.0, 5.0))


@dataclass(frozen=True, slots=True)
class Seeded:
    planned: dict[str, float]  # run id -> the instant it is due (epoch seconds)
    first: datetime
    horizon: datetime
    groups: Groups  # "steady" and "burst" run ids


async def seed(pool: asyncpg.Pool, spec: FaultSpec, plan: ChaosPlan, sink_base: str,
               tenants: list[uuid.UUID]) -> Seeded:
    now = await db_now(pool)
    first = occurrences_between(CRON_EVERY_SECOND, "UTC", now + timedelta(seconds=LEAD_SECONDS),
                                now + timedelta(hours=1), 1)[0]
    horizon = first + timedelta(seconds=plan.duration)
    occurrences = occurrences_between(CRON_EVERY_SECOND, "UTC", first - timedelta(microseconds=1),
                                      horizon, 10_000_000)
    planned: dict[str, float] = {}
    groups: Groups = {"steady": set(), "burst": set()}
    steady_tenants = tenants[1:] if spec.burst else tenants
    per_tenant = 1 if spec.burst else plan.schedules
    target = target_to_document(Target(f"{sink_base}/d/{spec.sink_delay_ms}/hook"))
    for tenant in steady_tenants:
        ids = await seed_firing_schedules(pool, tenant, per_tenant, cron=CRON_EVERY_SECOND,
                                          target=target, retry=RETRY, first=first,
                                          ends_at=horizon, name="chaos-")
        for sid in ids:
            for at in occurrences:
                run_id = str(run_id_for(sid, at))
                planned[run_id] = at.timestamp()
                groups["steady"].add(run_id)
    if spec.burst:
        burst = await seed_schedule(pool, tenants[0],
                                    f"{sink_base}/d/{spec.burst_delay_ms}/burst", retry=RETRY)
        for burst_id in await seed_due_run_ids(pool, burst, plan.burst, first=1, due_at=first):
            planned[str(burst_id)] = first.timestamp()
            groups["burst"].add(str(burst_id))
    return Seeded(planned, first, horizon, groups)
