"""`cronwire keys rotate` while real replicas deliver (ADR 0061): replicas
configured with the new key first and the old one second keep delivering through the
re-wrap; afterwards a replica with the new key alone joins and delivers too. No occurrence
is lost, and every request's signature verifies with `standardwebhooks` under the secret
its schedule was given; every header arrives in clear."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta

import asyncpg
import pytest
from standardwebhooks import Webhook

from cronwire.adapters.crypto.key_ring import KeyRing
from cronwire.adapters.postgres.data_key_store import PostgresDataKeyStore
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.config import parse_key_ring
from cronwire.domain.delivery import new_signing_secret
from cronwire.domain.model import RetryPolicy, Target
from cronwire.domain.schedules import ScheduleSpec
from cronwire.harness.fleet import HARNESS_SECRET_KEYS
from cronwire.harness.seeding import non_terminal, seed_tenant
from cronwire.harness.sink import Sink
from cronwire.service.secret_keys import key_status, rotate_data_keys
from tests.support.polling import wait_until
from tests.support.replicas import ReplicaSet
from tests.support.secrets import secret_box

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
NEW_KEY = "rotated:" + base64.b64encode(b"\x33" * 32).decode()
TENANTS, PER_TENANT, WINDOW_SECONDS = 4, 3, 16


async def test_rotating_the_key_ring_while_replicas_deliver_loses_nothing(
        db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet) -> None:
    now: datetime = await db_pool.fetchval("SELECT now()")
    starts, ends = now + timedelta(seconds=6), now + timedelta(seconds=6 + WINDOW_SECONDS)
    secrets: dict[str, str] = {}
    store = PostgresScheduleStore(db_pool, secret_box(db_pool))  # the old key alone
    for t in range(TENANTS):
        tenant = await seed_tenant(db_pool, f"t{t}")
        for s in range(PER_TENANT):
            secret = new_signing_secret()
            spec = ScheduleSpec(
                name=f"s{s}", cron="* * * * * *", starts_at=starts, ends_at=ends,
                target=Target(sink.url, headers={"Authorization": f"Bearer t{t}s{s}"}),
                retry=RetryPolicy(3, 0.2, 1))
            record = await store.create(tenant, spec, paused=False, signing_secret=secret,
                                        max_schedules=100)
            secrets[str(record.id)] = secret
    both = f"{NEW_KEY},{HARNESS_SECRET_KEYS}"
    replicas = [await fleet.spawn(name, roles="planner,executor", delivery_timeout=5.0,
                                  executor_workers=32, secret_keys=both) for name in "ab"]
    await wait_until(lambda: sink.unique >= TENANTS * PER_TENANT * 3, within=30, every=0.1)

    ring = KeyRing(parse_key_ring("SCHEDULER_SECRET_KEYS", both))
    data_keys = PostgresDataKeyStore(db_pool)
    assert await rotate_data_keys(ring, data_keys, batch=1) == TENANTS
    assert dict(await key_status(data_keys)) == {"rotated": TENANTS}
    # The old key leaves the configuration: a replica with the new key alone joins.
    await fleet.spawn("c", roles="planner,executor", delivery_timeout=5.0,
                      executor_workers=32, secret_keys=NEW_KEY)
    assert await replicas[1].stop() == 0

    async def settled() -> bool:
        if await db_pool.fetchval("SELECT now()") < ends + timedelta(seconds=1):
            return False
        return await non_terminal(db_pool) == 0

    await wait_until(settled, within=90, every=0.5)
    rows = await db_pool.fetch("SELECT schedule_id, status FROM job_run")
    per_schedule = {sid: sum(1 for r in rows if str(r["schedule_id"]) == sid) for sid in secrets}
    occurrences = len([s for s in range(WINDOW_SECONDS + 2)
                       if starts <= starts.replace(microsecond=0) + timedelta(seconds=s) <= ends])
    assert set(per_schedule.values()) == {occurrences}  # every occurrence planned, once
    assert {r["status"] for r in rows} == {"succeeded"}  # lost 0
    assert sink.unique == len(rows)
    for arrival in sink.arrivals:
        schedule_id = arrival.headers["x-cronwire-schedule-id"]
        Webhook(secrets[schedule_id]).verify(arrival.body, dict(arrival.headers))
        assert arrival.headers["Authorization"].startswith("Bearer t")
