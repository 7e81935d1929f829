"""Partition keeper and fleet gauges against a real database."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import asyncpg

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.service.maintenance import FleetGauges, PartitionKeeper
from tests.support.processes import clean_env, run_cli


def _month(offset: int) -> str:
    now = datetime.now(UTC)
    index = now.year * 12 + now.month - 1 + offset
    return f"p{index // 12:04d}_{index % 12 + 1:02d}"


async def _insert_run(pool: asyncpg.Pool, when: str, status: str = "pending") -> None:
    await pool.execute(
        "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, fire_after, status) "
        "VALUES (gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), $1::timestamptz, 'k', $1::timestamptz, $2)",
        datetime.fromisoformat(when), status,
    )


async def test_keeper_creates_ahead_and_drops_expired_partitions(db_pool: asyncpg.Pool) -> None:
    now = datetime.now(UTC)
    old_index = now.year * 12 + now.month - 1 - 6
    old_start = f"{old_index // 12:04d}-{old_index % 12 + 1:02d}-01"
    await db_pool.execute("SELECT cronwire_ensure_partitions($1::date, 1)", datetime.fromisoformat(old_start).date())
    # Finished: retention keeps a month that still holds unfinished runs.
    await _insert_run(db_pool, old_start + "T12:00:00+00:00", "succeeded")
    await _insert_run(db_pool, now.isoformat())
    # As if migrated a month ago: the month two ahead does not exist yet.
    await db_pool.execute(f"DROP TABLE job_run_{_month(2)}, job_run_attempt_{_month(2)}")

    store = PostgresMaintenanceStore(db_pool)
    keeper = PartitionKeeper(store, retention_months=3, interval_seconds=3600,
                             audit_retention_days=400)
    created, dropped = await keeper.run_once()

    names = set(await store.partitions())
    assert f"job_run_{_month(-6)}" in dropped and f"job_run_attempt_{_month(-6)}" in dropped
    assert f"job_run_{_month(-6)}" not in names
    for offset in (-2, -1, 0, 1, 2):  # within retention (3 months incl. this one) and ahead
        assert f"job_run_{_month(offset)}" in names
    # job_run and job_run_attempt for the month two ahead and the oldest kept month (the
    # migration made only last month, and a backfill may write anywhere retention keeps).
    assert created == 4
    assert await db_pool.fetchval("SELECT count(*) FROM job_run") == 1  # only the expired row went
    assert await keeper.run_once() == (0, [])  # idempotent


async def test_dropping_a_partition_releases_the_overlap_gates_its_runs_held(
    db_pool: asyncpg.Pool,
) -> None:
    """A run holding a schedule's overlap gate whose partition retention drops can never be
    seen to end: the gate is released with the drop (a recent holder keeps it)."""
    now = datetime.now(UTC)
    old_index = now.year * 12 + now.month - 1 - 6
    old_start = datetime.fromisoformat(f"{old_index // 12:04d}-{old_index % 12 + 1:02d}-01"
                                       "T12:00:00+00:00")
    await db_pool.execute("SELECT cronwire_ensure_partitions($1::date, 1)", old_start.date())
    tenant = await db_pool.fetchval("INSERT INTO tenant (id, name) VALUES (gen_random_uuid(), "
                                    "'t') RETURNING id")
    gates = {}
    for name, held_at in (("old", old_start), ("recent", now)):
        gates[name] = await db_pool.fetchval(
            "INSERT INTO schedule (id, tenant_id, name, cron, target, retry, signing_secret, "
            "overlap_policy, overlap_run, overlap_run_at) VALUES (gen_random_uuid(), $1, $2, "
            "'* * * * *', '{}', '{}', 'x', 'skip', gen_random_uuid(), $3) RETURNING id",
            tenant, name, held_at)
    _, dropped = await PartitionKeeper(PostgresMaintenanceStore(db_pool), retention_months=3,
                                       interval_seconds=3600,
                                       audit_retention_days=400).run_once()
    assert f"job_run_{_month(-6)}" in dropped
    held = dict(await db_pool.fetch("SELECT name, overlap_run IS NOT NULL FROM schedule"))
    assert held == {"old": False, "recent": True}


async def test_only_one_keeper_does_ddl_at_a_time(db_pool: asyncpg.Pool) -> None:
    store = PostgresMaintenanceStore(db_pool)
    results = await asyncio.gather(*(store.maintain_partitions(6, 3) for _ in range(4)))
    # 5 months x 2 tables, created once: two months back (retention 3) and 3..6 ahead.
    assert sum(created for created, _ in results) == 10


async def test_gauges_report_backlog_and_small_clock_skew(db_pool: asyncpg.Pool) -> None:
    for _ in range(3):
        await _insert_run(db_pool, "2000-01-01T00:00:00+00:00".replace("2000-01-01", datetime.now(UTC).date().isoformat()))
    await db_pool.execute("UPDATE job_run SET fire_after = now() - interval '1 minute'")
    metrics = PrometheusMetrics()
    backlog, skew = await FleetGauges(PostgresMaintenanceStore(db_pool), metrics, SystemClock(), interval_seconds=5).sample()
    assert backlog == 3 and abs(skew) < 1.0
    text = metrics.exposition().decode()
    assert "scheduler_runs_due_backlog 3.0" in text


def test_partitions_maintain_command(database_url: str) -> None:
    result = run_cli("partitions", "maintain", env=clean_env(SCHEDULER_DATABASE_URL=database_url))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert f"job_run_{_month(2)}" in report["partitions"]


async def _alert_events(pool: asyncpg.Pool, count: int, days_old: int,
                        status: str = "delivered") -> None:
    tenant = await pool.fetchval("INSERT INTO tenant (id, name) VALUES (gen_random_uuid(), "
                                 "'t') RETURNING id")
    for _ in range(count):
        event = await pool.fetchval(
            "INSERT INTO alert_event (id, tenant_id, schedule_id, schedule_name, type, status, "
            "created_at) VALUES (gen_random_uuid(), $1, gen_random_uuid(), 's', "
            "'schedule.failing', $2, now() - make_interval(days => $3)) RETURNING id",
            tenant, status, days_old)
        await pool.execute(
            "INSERT INTO alert_event_attempt (event_id, attempt, started_at, finished_at, "
            "outcome, duration_ms) VALUES ($1, 1, now(), now(), 'success', 1)", event)


async def test_alert_events_past_retention_are_deleted_in_bounded_batches(
    db_pool: asyncpg.Pool,
) -> None:
    await _alert_events(db_pool, 7, days_old=401)
    await _alert_events(db_pool, 1, days_old=401, status="delivering")  # a send in flight
    await _alert_events(db_pool, 2, days_old=399)
    store = PostgresMaintenanceStore(db_pool)
    # Three rows a statement, two statements a pass: six of the seven expired rows go.
    assert await store.delete_expired_alert_events(400, batch=3, max_batches=2) == 6
    assert await store.delete_expired_alert_events(400, batch=3, max_batches=2) == 1
    assert await store.delete_expired_alert_events(400, batch=3, max_batches=2) == 0
    left = await db_pool.fetch("SELECT status, created_at > now() - interval '400 days' AS "
                               "recent FROM alert_event ORDER BY recent")
    assert [(r["status"], r["recent"]) for r in left] == [
        ("delivering", False), ("delivered", True), ("delivered", True)]
    assert await db_pool.fetchval("SELECT count(*) FROM alert_event_attempt") == 3  # cascaded


def test_partitions_maintain_applies_the_audit_retention(database_url: str) -> None:
    asyncio.run(_seed_expired_alerts(database_url))
    result = run_cli("partitions", "maintain", env=clean_env(
        SCHEDULER_DATABASE_URL=database_url, SCHEDULER_AUDIT_RETENTION_DAYS="30"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["alert_events_deleted"] == 2
    for bad in ("0", "-5", "36501", "many"):
        refused = run_cli("partitions", "maintain", env=clean_env(
            SCHEDULER_DATABASE_URL=database_url, SCHEDULER_AUDIT_RETENTION_DAYS=bad))
        assert refused.returncode == 2, (bad, refused.stderr)
        [line] = refused.stderr.strip().splitlines()
        assert "SCHEDULER_AUDIT_RETENTION_DAYS" in line


async def _seed_expired_alerts(database_url: str) -> None:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    try:
        await _alert_events(pool, 2, days_old=31)
        await _alert_events(pool, 1, days_old=29)
    finally:
        await pool.close()
