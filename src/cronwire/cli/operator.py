"""Operator commands straight on the database: `cronwire tenant list|tokens|revoke`.

Like `tenant create`, they use ``SCHEDULER_DATABASE_URL`` or, without it, the embedded
Postgres under ``SCHEDULER_HOME``. Unlike `tenant create` they refuse to start an empty
embedded database: run from another directory, they would otherwise show no tenants (or
"not found") for a database the running server does not use. The embedded path is always
said on stderr (after success), and "not found" names the database, so the mix-up is visible.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from cronwire.cli.output import Column, field, print_json, render_table, wants_json
from cronwire.config import Settings
from cronwire.domain.errors import ConfigError, CronwireError, NotFound, StorageError

if TYPE_CHECKING:
    from cronwire.bootstrap.factories import TenantAdmin

T = TypeVar("T")

TENANT_COLUMNS = [
    Column("ID", field("id")), Column("NAME", field("name")),
    Column("CREATED (UTC)", field("created_at")), Column("SCHEDULES", field("schedules")),
    Column("LIVE TOKENS", field("live_tokens")),
]
TOKEN_COLUMNS = [
    Column("ID", field("id")), Column("PREFIX", field("prefix")),
    Column("CREATED (UTC)", field("created_at")), Column("REVOKED (UTC)", field("revoked_at")),
]
_JSON_HELP = "print a JSON list of objects (the default when stdout is not a terminal)"


def database_label(settings: Settings) -> str:
    """Which database a command uses, for messages; a DSN's password is never shown."""
    if settings.embedded_database:
        return f"the embedded database in {(settings.home / 'postgres').resolve()}"
    parts = urlsplit(settings.database_url or "")
    if parts.password is not None:
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    return f"database {urlunsplit(parts._replace(query=''))}"


@contextlib.contextmanager
def existing_database(settings: Settings) -> Iterator[Settings]:
    """Settings with a reachable DSN; an embedded database must already exist."""
    if not settings.embedded_database:
        yield settings
        return
    from cronwire.adapters.embedded.postgres import EmbeddedPostgres

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


def _on_tenants(settings: Settings, action: Callable[[TenantAdmin], Awaitable[T]]) -> T:
    """Run ``action(tenant_store)``; an unknown id is a usage error naming the database."""
    from cronwire.bootstrap.factories import DATABASE_ERRORS
    from cronwire.cli.main import _run_async, _with_tenants

    with existing_database(settings) as ready:
        try:
            return _run_async(lambda: _with_tenants(ready, action))
        except NotFound as exc:
            raise ConfigError(f"{exc} in {database_label(settings)}") from None
        except (*DATABASE_ERRORS, StorageError) as exc:
            raise CronwireError(f"cannot use {database_label(settings)}: {exc}") from None


def _uuid(label: str, text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ConfigError(f"{label}: not a UUID: {text!r}") from None


def _print_rows(args: argparse.Namespace, rows: list[dict[str, Any]],
                columns: list[Column]) -> int:
    if wants_json(args.json):
        print_json(rows)
    else:
        print(render_table(rows, columns))
    return 0


def cmd_tenant_list(settings: Settings, args: argparse.Namespace) -> int:
    found = _on_tenants(settings, lambda store: store.list_tenants())
    return _print_rows(args, [tenant.as_json() for tenant in found], TENANT_COLUMNS)


def cmd_tenant_tokens(settings: Settings, args: argparse.Namespace) -> int:
    tenant_id = _uuid("TENANT_ID", args.tenant_id)
    found = _on_tenants(settings, lambda store: store.list_tokens(tenant_id))
    return _print_rows(args, [token.as_json() for token in found], TOKEN_COLUMNS)


def cmd_tenant_revoke(settings: Settings, args: argparse.Namespace) -> int:
    token_id = _uuid("TOKEN_ID", args.token_id)
    revoked = _on_tenants(settings, lambda store: store.revoke(token_id))
    print_json(revoked.as_json())
    return 0


def add_operator_commands(tenant_commands: argparse._SubParsersAction[Any]) -> None:
    """`tenant list|tokens|revoke`, next to `tenant create|token` in main.py."""
    listing = tenant_commands.add_parser(
        "list", help="list tenants: id, name, created, live schedules and live tokens")
    listing.add_argument("--json", action="store_true", help=_JSON_HELP)
    listing.set_defaults(handler=cmd_tenant_list)

    tokens = tenant_commands.add_parser(
        "tokens", help="list a tenant's tokens: id, prefix, created, revoked (never the token)")
    tokens.add_argument("tenant_id", metavar="TENANT_ID", help="the tenant's UUID")
    tokens.add_argument("--json", action="store_true", help=_JSON_HELP)
    tokens.set_defaults(handler=cmd_tenant_tokens)

    revoke = tenant_commands.add_parser(
        "revoke", help="revoke a token at once, on every replica (idempotent); prints it as JSON",
        description="Revoke a token by its id (from `cronwire tenant tokens`). The API checks "
        "revocation on every request, so the next request with it answers 401 on every replica.")
    revoke.add_argument("token_id", metavar="TOKEN_ID", help="the token's id (not the token)")
    revoke.set_defaults(handler=cmd_tenant_revoke)
