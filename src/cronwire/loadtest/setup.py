"""What a load test sets up before it measures: the servers (an embedded Postgres unless
given one, the embedded broker for kafka mode), a fresh database with the load test's
tenant and schedules, and the replicas (the sink is sinks.py's). Everything runs on
loopback."""

from __future__ import annotations

import contextlib
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from cronwire.bootstrap.embedded import EmbeddedBroker, EmbeddedPostgres
from cronwire.bootstrap.factories import fresh_database, harness_queries, open_pool
from cronwire.domain.cron import occurrences_between
from cronwire.domain.documents import retry_to_document, target_to_document
from cronwire.domain.model import RetryPolicy, Target
from cronwire.harness.fleet import Fleet, replica_env
from cronwire.harness.seeding import db_now, seed_firing_schedules, seed_tenant
from cronwire.loadtest import statements
from cronwire.loadtest.plan import LoadTestPlan

REPLICA_START_SECONDS = 60.0
Q = harness_queries(Path(__file__).with_name("loadtest.sql"))


def note(message: str) -> None:
    """One line of the load test's own on stderr (the progress line is progress.py's)."""
    print(f"[loadtest] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def servers(plan: LoadTestPlan) -> Iterator[tuple[str, str | None]]:
    """(admin DSN, Kafka bootstrap or None), torn down afterwards."""
    pg = None
    broker = None
    admin_dsn = plan.dsn
    try:
        if admin_dsn is None:
            pg = (EmbeddedPostgres(plan.out / "postgres", settings=statements.SETTINGS)
                  if plan.statements else EmbeddedPostgres(plan.out / "postgres"))
            admin_dsn = pg.start()
        if plan.mode == "kafka" and plan.kafka_bootstrap is None:
            broker = EmbeddedBroker(plan.out / "broker.log")
            broker.start()
        yield admin_dsn, broker.bootstrap if broker else plan.kafka_bootstrap
    finally:
        if broker is not None:
            broker.stop()
        if pg is not None:
            pg.stop()


def database_name(prefix: str) -> str:
    return f"{prefix}_{int(time.time())}_{uuid.uuid4().hex[:6]}"


async def prepare(admin_dsn: str) -> tuple[str, uuid.UUID]:
    """A fresh, migrated database with the load test's tenant: (DSN, tenant id)."""
    dsn = await fresh_database(admin_dsn, database_name("loadtest"))
    pool = await open_pool(dsn, 2)
    try:
        return dsn, await seed_tenant(pool, "loadtest")
    finally:
        await pool.close()


async def seed(dsn: str, plan: LoadTestPlan, tenant_id: uuid.UUID,
               url: str) -> tuple[list[uuid.UUID], datetime, datetime]:
    """Schedules whose first fire is the first cron instant after the warm-up; returns
    (ids, first instant, last instant). The planner itself stops each at ``ends_at``."""
    pool = await open_pool(dsn, 2)
    try:
        now = await db_now(pool)
        first = occurrences_between(
            plan.cron, "UTC", now + timedelta(seconds=plan.warmup_seconds()),
            now + timedelta(days=1), 1,
        )[0]
        if plan.scenario == "burst":
            ends_at = first
        else:  # [first, first + duration): duration occurrences of a per-second cron
            ends_at = first + timedelta(seconds=plan.duration) - timedelta(microseconds=1)
        ids = await seed_firing_schedules(
            pool, tenant_id, plan.schedules, cron=plan.cron,
            target=target_to_document(Target(url)),
            retry=retry_to_document(RetryPolicy(5, 1.0, 30.0)), first=first, ends_at=ends_at,
            name="load-", jitter_seconds=plan.jitter_seconds)
        await pool.execute(Q["loadtest_analyze_schedules"])
        return ids, first, ends_at
    finally:
        await pool.close()


async def start_replicas(fleet: Fleet, plan: LoadTestPlan, dsn: str,
                         bootstrap: str | None) -> None:
    # The caller's SCHEDULER_DELIVERER is kept, so two deliverers can be compared.
    # A topic and consumer group of this run's own: the broker may be the user's.
    run = f"cronwire-loadtest-{dsn.rsplit('/', 1)[-1].split('?')[0]}" if bootstrap else None
    env = replica_env(dsn, keep={"SCHEDULER_DELIVERER"}, roles="planner,executor",
                      claim_source=plan.mode, executor_workers=plan.workers,
                      kafka_bootstrap_servers=bootstrap, kafka_topic=run,
                      kafka_consumer_group=run)
    (plan.out / "replicas").mkdir(exist_ok=True)
    for index in range(plan.replicas):
        await fleet.add(f"replica-{index}", env).start(within=REPLICA_START_SECONDS)
