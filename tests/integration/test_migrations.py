"""The migrated schema has the guarantees ARCHITECTURE.md relies on; the migrator is safe."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from cronwire.adapters.postgres.migrator import MIGRATIONS_DIR, discover, migrate
from cronwire.domain.errors import MigrationError
from tests.support.servers import DatabaseFactory, with_database


async def test_job_run_has_the_unique_occurrence_key(db_pool: asyncpg.Pool) -> None:
    columns = await db_pool.fetchval(
        """
        SELECT array_agg(a.attname ORDER BY k.ord)
        FROM pg_constraint c
        CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
        WHERE c.conrelid = 'job_run'::regclass AND c.contype = 'u'
        """
    )
    assert columns == ["schedule_id", "scheduled_for"]


@pytest.mark.parametrize("table", ["job_run", "job_run_attempt"])
async def test_run_tables_are_range_partitioned_monthly(db_pool: asyncpg.Pool, table: str) -> None:
    strategy, key = await db_pool.fetchrow(
        """
        SELECT p.partstrat::text, a.attname
        FROM pg_partitioned_table p
        JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]
        WHERE p.partrelid = $1::regclass
        """,
        table,
    )
    assert (strategy, key) == ("r", "scheduled_for")
    children = {
        row["relname"]
        for row in await db_pool.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = $1::regclass",
            table,
        )
    }
    now = datetime.now(UTC)
    next_month = datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=UTC)
    assert f"{table}_p{now:%Y_%m}" in children
    assert f"{table}_p{next_month:%Y_%m}" in children


async def test_partial_indexes_for_planner_and_claim(db_pool: asyncpg.Pool) -> None:
    rows = await db_pool.fetch(
        "SELECT c.relname AS name, pg_get_expr(i.indpred, i.indrelid) AS predicate "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid IN ('schedule'::regclass, 'job_run'::regclass)"
    )
    predicates = {row["name"]: row["predicate"] for row in rows}
    assert "status = 'active'" in predicates["schedule_due_idx"]
    assert "pending" in predicates["job_run_claim_idx"]
    assert "retrying" in predicates["job_run_claim_idx"]


async def test_attempt_primary_key_and_bounds(db_pool: asyncpg.Pool) -> None:
    pk = await db_pool.fetchval(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'job_run_attempt'::regclass AND contype = 'p'"
    )
    assert pk == "PRIMARY KEY (run_id, attempt, scheduled_for)"
    checks = await db_pool.fetch(
        "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint "
        "WHERE conrelid = 'job_run_attempt'::regclass AND contype = 'c'"
    )
    assert any("attempt >= 1" in r["def"] and "attempt <= 8" in r["def"] for r in checks)


async def test_tables_of_the_schema_exist(db_pool: asyncpg.Pool) -> None:
    names = {
        r["relname"]
        for r in await db_pool.fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "AND relkind IN ('r', 'p')"
        )
    }
    assert {"tenant", "api_token", "schedule", "job_run", "job_run_attempt",
            "target_breaker", "schema_migration"} <= names
    token_columns = {
        r["attname"]
        for r in await db_pool.fetch(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'api_token'::regclass "
            "AND attnum > 0"
        )
    }
    assert "token_hash" in token_columns and "token" not in token_columns


async def test_duplicate_occurrence_is_rejected_by_the_database(db_pool: asyncpg.Pool) -> None:
    when = datetime.now(UTC).replace(microsecond=0)
    insert = (
        "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, "
        "fire_after) VALUES (gen_random_uuid(), gen_random_uuid(), "
        "'00000000-0000-0000-0000-000000000001', $1, 'k', $1)"
    )
    await db_pool.execute(insert, when)
    with pytest.raises(asyncpg.UniqueViolationError):
        await db_pool.execute(insert, when)


async def test_changed_migration_file_is_refused(
    database_factory: DatabaseFactory, tmp_path: Path
) -> None:
    for migration in discover():
        (tmp_path / f"{migration.version:04d}_{migration.name}.sql").write_text(migration.sql)
    name, dsn = await database_factory.create()  # already migrated from the template
    try:
        assert await migrate(dsn, tmp_path) == []
        first = sorted(tmp_path.glob("*.sql"))[0]
        first.write_text(first.read_text() + "\n-- edited after release\n")
        with pytest.raises(MigrationError, match="checksum"):
            await migrate(dsn, tmp_path)
    finally:
        await database_factory.drop(name)


async def test_three_processes_migrating_at_once_apply_each_file_once(admin_dsn: str) -> None:
    name = "cw_concurrent_migrate"
    admin = await asyncpg.connect(admin_dsn)
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = with_database(admin_dsn, name)
    script = (
        "import asyncio, sys; from cronwire.adapters.postgres.migrator import migrate; "
        "print(asyncio.run(migrate(sys.argv[1])))"
    )
    try:
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable, "-c", script, dsn,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
            for _ in range(3)
        ]
        results = [await asyncio.wait_for(p.communicate(), 60) for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], [r[1].decode() for r in results]
        outputs = sorted(r[0].decode().strip() for r in results)
        expected = str([m.version for m in discover(MIGRATIONS_DIR)])
        assert outputs == sorted(["[]", "[]", expected])
        conn = await asyncpg.connect(dsn)
        try:
            assert await conn.fetchval("SELECT count(*) FROM schema_migration") == len(discover())
        finally:
            await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


# What a schema is made of, each as comparable text: column order is left out (a column
# added by a later file lands after the columns an earlier file added; nothing reads
# columns by position).
SCHEMA_PARTS = {
    "columns": """SELECT table_name || '.' || column_name || ' ' || data_type || ' '
                         || COALESCE(column_default, '') || ' ' || is_nullable
                    FROM information_schema.columns WHERE table_schema = 'public'""",
    "constraints": """SELECT conrelid::regclass::text || ' ' || conname || ' '
                             || pg_get_constraintdef(oid)
                        FROM pg_constraint WHERE connamespace = 'public'::regnamespace""",
    "indexes": "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "functions": """SELECT pg_get_functiondef(p.oid) FROM pg_proc p
                     WHERE p.pronamespace = 'public'::regnamespace""",
    "triggers": """SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t
                    JOIN pg_class c ON c.oid = t.tgrelid
                   WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal""",
    "views": "SELECT viewname || ' ' || definition FROM pg_views WHERE schemaname = 'public'",
}


async def _schema(dsn: str) -> dict[str, list[str]]:
    conn = await asyncpg.connect(dsn)
    try:
        return {part: sorted(r[0] for r in await conn.fetch(sql))
                for part, sql in SCHEMA_PARTS.items()}
    finally:
        await conn.close()


async def test_a_held_number_applies_on_a_database_already_past_it(
    admin_dsn: str, database_factory: DatabaseFactory, tmp_path: Path
) -> None:
    """Flow control's 0012 landed after 0014 and 0015 (migrations/README.md): a database
    that recorded 0015 without it gets it at the next migrate, with the same schema as a
    database migrated in order, and its tenants get their flow-control rows."""
    held = 12
    assert held in {m.version for m in discover()}
    assert max(m.version for m in discover()) > held
    # The database as it stood when 0012 was held: every file up to 0015 but 0012 (later
    # files, 0018's bounds on flow_control among them, build on 0012 and come after it).
    past_it = 15
    later = [m.version for m in discover() if m.version > past_it]
    for migration in discover():
        if migration.version != held and migration.version <= past_it:
            (tmp_path / f"{migration.version:04d}_{migration.name}.sql").write_text(
                migration.sql)
    name = "cw_held_number_migrate"
    admin = await asyncpg.connect(admin_dsn)
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = with_database(admin_dsn, name)
    in_order, in_order_dsn = await database_factory.create()
    try:
        before = await migrate(dsn, tmp_path)
        assert held not in before and max(before) > held
        conn = await asyncpg.connect(dsn)
        try:
            tenant = await conn.fetchval(
                "INSERT INTO tenant (id, name) VALUES (gen_random_uuid(), 'early') RETURNING id")
        finally:
            await conn.close()

        assert await migrate(dsn) == [held, *later]

        assert await _schema(dsn) == await _schema(in_order_dsn)
        conn = await asyncpg.connect(dsn)
        try:
            assert await conn.fetchval(
                "SELECT count(*) FROM flow_control WHERE tenant_id = $1 AND key = ''",
                tenant) == 1
        finally:
            await conn.close()
    finally:
        await database_factory.drop(in_order)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
