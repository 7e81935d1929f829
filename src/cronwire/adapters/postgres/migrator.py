"""Numbered ``.sql`` migrations with checksums, safe when several replicas run at once.

Every migrating process takes one session-level advisory lock first, so concurrent
``cronwire migrate`` / ``serve`` starts apply each file exactly once. An applied file
whose checksum changed is refused: the database no longer matches the code.

The files ship inside the package: ``src/cronwire/migrations`` is a symlink to the
repository's top-level ``migrations/`` (the one source of truth), and package data copies
what it points at into every wheel, so a new file there needs no extra step. A migrator
that finds no files refuses to run: "nothing to apply" must never hide a broken install.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from cronwire.adapters.postgres.connect import connect_primary
from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.errors import MigrationError

# cronwire/migrations: a symlink in the source tree, real files in an installed wheel.
MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
# pg_advisory_lock key: the first 8 bytes of sha256("cronwire.migrate"), fixed forever.
LOCK_KEY = int.from_bytes(hashlib.sha256(b"cronwire.migrate").digest()[:8], "big", signed=True)
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
Q = queries()

@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    found: list[Migration] = []
    paths = sorted(directory.glob("*.sql"))
    if not paths:
        raise MigrationError(
            f"no migration files in {directory}: this installation is incomplete "
            "(the package must ship cronwire/migrations/*.sql)"
        )
    for path in paths:
        match = _FILE.match(path.name)
        if match is None:
            raise MigrationError(f"migration file name not NNNN_name.sql: {path.name}")
        found.append(Migration(int(match[1]), match[2], path.read_text(encoding="utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError("two migration files share a version number")
    return found


async def pending(conn: asyncpg.Connection, migrations: list[Migration]) -> list[Migration]:
    """Migrations not yet applied; raises if an applied one differs from its file."""
    exists = await conn.fetchval(Q["schema_migration_exists"])
    applied: dict[int, str] = {}
    if exists:
        rows = await conn.fetch(Q["schema_migration_list"])
        applied = {row["version"]: row["checksum"] for row in rows}
    for migration in migrations:
        recorded = applied.get(migration.version)
        if recorded is not None and recorded != migration.checksum:
            raise MigrationError(
                f"migration {migration.version:04d}_{migration.name}.sql changed after it was "
                "applied (checksum mismatch); restore the file or write a new migration"
            )
    return [m for m in migrations if m.version not in applied]


async def migrate(dsn: str, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Apply pending migrations in order, each in its own transaction; returns applied versions."""
    migrations = discover(directory)
    with storage_errors("applying migrations"):
        conn = await connect_primary(dsn, server_settings={"application_name": "cronwire-migrate"})
        try:
            await conn.execute(Q["advisory_lock"], LOCK_KEY)
            try:
                await conn.execute(Q["schema_migration_create"])
                applied: list[int] = []
                for migration in await pending(conn, migrations):
                    async with conn.transaction():
                        await conn.execute(migration.sql)
                        await conn.execute(
                            Q["schema_migration_insert"],
                            migration.version, migration.name, migration.checksum,
                        )
                    applied.append(migration.version)
                return applied
            finally:
                await conn.execute(Q["advisory_unlock"], LOCK_KEY)
        finally:
            await conn.close()


async def is_current(conn: asyncpg.Connection, directory: Path = MIGRATIONS_DIR) -> bool:
    """True when every migration file is applied unchanged (used by /readyz)."""
    try:
        return not await pending(conn, discover(directory))
    except MigrationError:
        return False
