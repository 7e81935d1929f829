"""The database the operator commands work on, shared by every one of them.

Commands use ``SCHEDULER_DATABASE_URL`` or, without it, the embedded Postgres under
``SCHEDULER_HOME``. `tenant create` and `migrate` may start a new, empty embedded
database (the first run of a fresh install); the other tenant commands refuse to: run
from another directory, they would otherwise show no tenants (or "not found") for a
database the running server does not use. The embedded path is always said on stderr
(after success), and "not found" names the database, so the mix-up is visible.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from cronwire.config import Settings, shown_dsn
from cronwire.domain.errors import ConfigError, CronwireError, NotFound, StorageError

if TYPE_CHECKING:
    from cronwire.bootstrap.factories import TenantAdmin

T = TypeVar("T")


def database_label(settings: Settings) -> str:
    """Which database a command uses, for messages; a DSN's password is never shown."""
    if settings.embedded_database:
        return f"the embedded database in {(settings.home / 'postgres').resolve()}"
    return f"database {shown_dsn(settings.database_url or '')}"


@contextlib.contextmanager
def any_database(settings: Settings) -> Iterator[Settings]:
    """Settings with a reachable DSN; may start a new, empty embedded database (`migrate`,
    `tenant create`, `partitions maintain` on a fresh install)."""
    with _database(settings, may_create=True) as ready:
        yield ready


@contextlib.contextmanager
def existing_database(settings: Settings) -> Iterator[Settings]:
    """Settings with a reachable DSN; an embedded database must already exist."""
    with _database(settings, may_create=False) as ready:
        yield ready


@contextlib.contextmanager
def _database(settings: Settings, *, may_create: bool) -> Iterator[Settings]:
    """The command's database. An embedded one is reused if `cronwire serve` runs on it,
    else started for this command and stopped after; after success, one stderr line says
    which (never a DSN: one can hold a password, and the port changes every start)."""
    if not settings.embedded_database:
        yield settings
        return
    data_dir = (settings.home / "postgres").resolve()
    new = not (data_dir / "PG_VERSION").exists()
    if new and not may_create:
        raise ConfigError(
            f"no embedded database in {data_dir}; run where `cronwire serve` runs, or set "
            "SCHEDULER_HOME or SCHEDULER_DATABASE_URL"
        )
    from cronwire.bootstrap.embedded import EmbeddedPostgres

    server = EmbeddedPostgres(data_dir)
    dsn = server.start()  # reuses a server already running on it (`cronwire serve`)
    if new:
        how = ("new and empty, started for this command; a `cronwire serve` started "
               "elsewhere does not see it")
    else:
        how = "started for this command" if server.started_here else "already running"
    try:
        yield dataclasses.replace(settings, database_url=dsn)
        # Said after success only: a refusal is one line that names the database itself.
        print(f"cronwire: using {database_label(settings)} ({how})", file=sys.stderr)
    finally:
        server.stop()  # only if this command started it


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    import asyncio  # here: only the commands that use the database pay for it

    async def main() -> T:
        return await make()

    return asyncio.run(main())


async def with_tenants(settings: Settings, action: Callable[[TenantAdmin], Awaitable[T]]) -> T:
    from cronwire.bootstrap.factories import tenant_admin

    async with tenant_admin(settings) as tenants:
        return await action(tenants)


def on_tenants(settings: Settings, action: Callable[[TenantAdmin], Awaitable[T]]) -> T:
    """Run ``action(tenant_store)`` on an existing database; an unknown id is a usage
    error naming the database."""
    from cronwire.bootstrap.factories import DATABASE_ERRORS

    with existing_database(settings) as ready:
        try:
            return run_async(lambda: with_tenants(ready, action))
        except NotFound as exc:
            raise ConfigError(f"{exc} in {database_label(settings)}") from None
        except (*DATABASE_ERRORS, StorageError) as exc:
            raise CronwireError(f"cannot use {database_label(settings)}: {exc}") from None
