"""The database the operator commands work on, shared by every one of them.

Commands use ``SCHEDULER_DATABASE_URL`` or, without it, the embedded Postgres under
``SCHEDULER_HOME``. `tenant create` and `migrate` may start a new, empty embedded
database (the first run of a fresh install); the other tenant commands refuse to: run
from another directory, they would otherwise show no tenants (or "not found") for a
database the running server does not use. The embedded path is always said on stderr
(after success), and "not found" names the database, so the mix-up is visible.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from cronwire.config import Settings
from cronwire.domain.errors import ConfigError, CronwireError, NotFound, StorageError

if TYPE_CHECKING:
    from cronwire.bootstrap.factories import TenantAdmin

T = TypeVar("T")


def database_label(settings: Settings) -> str:
    """Which database a command uses, for messages; a DSN's password is never shown."""
    if settings.embedded_database:
        return f"the embedded database in {(settings.home / 'postgres').resolve()}"
    from cronwire.bootstrap.factories import redacted_dsn

    return f"database {redacted_dsn(settings.database_url or '')}"


@contextlib.contextmanager
def any_database(settings: Settings) -> Iterator[Settings]:
    """Settings with a reachable DSN; starts the embedded server for one command if needed."""
    from cronwire.bootstrap.embedded import start_embedded_postgres

    settings, embedded = start_embedded_postgres(settings)
    try:
        yield settings
    finally:
        if embedded is not None:
            embedded.stop()


@contextlib.contextmanager
def existing_database(settings: Settings) -> Iterator[Settings]:
    """Settings with a reachable DSN; an embedded database must already exist."""
    if not settings.embedded_database:
        yield settings
        return
    from cronwire.bootstrap.embedded import EmbeddedPostgres

    data_dir = (settings.home / "postgres").resolve()
    if not (data_dir / "PG_VERSION").exists():
        raise ConfigError(
            f"no embedded database in {data_dir}; run where `cronwire serve` runs, or set "
            "SCHEDULER_HOME or SCHEDULER_DATABASE_URL"
        )
    # One line of ours says which database; the adapter's "already running" is noise here.
    logging.getLogger(EmbeddedPostgres.__module__).setLevel(logging.WARNING)
    server = EmbeddedPostgres(data_dir)
    dsn = server.start()  # reuses a server already running on it (`cronwire serve`)
    how = "started for this command" if server.started_here else "already running"
    try:
        yield dataclasses.replace(settings, database_url=dsn)
        # Said after success only: a refusal is one line that names the database itself.
        print(f"cronwire: using {database_label(settings)} ({how})", file=sys.stderr)
    finally:
        server.stop()  # only if this command started it


def warn_if_new_database(settings: Settings) -> None:
    """`tenant create` may start a new embedded database (the first tenant of a fresh
    install), but says so: from the wrong directory it is not the server's database."""
    data_dir = (settings.home / "postgres").resolve()
    if settings.embedded_database and not (data_dir / "PG_VERSION").exists():
        print(f"cronwire: no embedded database in {data_dir} yet; creating a new, empty one "
              "(a `cronwire serve` started elsewhere will not see this tenant)",
              file=sys.stderr)


def run_async(make: Callable[[], Awaitable[T]]) -> T:
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
