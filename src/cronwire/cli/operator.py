"""Operator commands, straight on the database: `cronwire serve`, `migrate`,
`tenant create|token|list|tokens|revoke|limit` and `partitions maintain`.

Which database, and when an embedded one may be started, is database.py's rule. Errors a
user can fix are a ConfigError (one line, exit 2, from main.py)."""

from __future__ import annotations

import argparse
import json
import uuid
from typing import TYPE_CHECKING, Any

from cronwire.cli.database import (
    any_database,
    database_label,
    existing_database,
    on_tenants,
    run_async,
    with_tenants,
)
from cronwire.cli.output import Column, field, print_json, render_table, wants_json
from cronwire.config import Settings
from cronwire.domain.access import check_token_name, parse_expires_in, parse_scope
from cronwire.domain.errors import ConfigError, NotFound, RuleViolation
from cronwire.domain.labels import label_refusal

if TYPE_CHECKING:
    from cronwire.bootstrap.factories import TenantAdmin

TENANT_COLUMNS = [
    Column("ID", field("id")), Column("NAME", field("name")),
    Column("CREATED (UTC)", field("created_at")), Column("SCHEDULES", field("schedules")),
    Column("LIVE TOKENS", field("live_tokens")),
]
TOKEN_COLUMNS = [
    Column("ID", field("id")), Column("NAME", field("name")), Column("SCOPE", field("scope")),
    Column("PREFIX", field("prefix")), Column("CREATED (UTC)", field("created_at")),
    Column("EXPIRES (UTC)", field("expires_at")), Column("REVOKED (UTC)", field("revoked_at")),
]
TENANT_NAME_MAX_CHARS = 200
_JSON_HELP = "print a JSON list of objects (the default when stdout is not a terminal)"


def cmd_serve(settings: Settings, _args: argparse.Namespace) -> int:
    from cronwire.bootstrap.replica import serve

    serve(settings)
    return 0


def cmd_migrate(settings: Settings, _args: argparse.Namespace) -> int:
    from cronwire.bootstrap.factories import migrate

    with any_database(settings) as ready:
        assert ready.database_url is not None
        dsn = ready.database_url
        applied = run_async(lambda: migrate(dsn))
    print(json.dumps({"applied": applied}))
    return 0


def cmd_tenant_create(settings: Settings, args: argparse.Namespace) -> int:
    name = args.name.strip()
    refusal = label_refusal(name, TENANT_NAME_MAX_CHARS)
    if refusal is not None:
        raise ConfigError(f"NAME: {refusal}")
    with any_database(settings) as ready:
        issued = run_async(lambda: with_tenants(ready, lambda s: s.create(name)))
    print(json.dumps(issued.as_json(detailed=False)))
    return 0


def cmd_tenant_token(settings: Settings, args: argparse.Namespace) -> int:
    tenant_id = _uuid("TENANT_ID", args.tenant_id)
    try:
        scope = parse_scope("--scope", args.scope)
        expires_in = (parse_expires_in("--expires-in", args.expires_in)
                      if args.expires_in else None)
        name = check_token_name("--name", args.name) if args.name is not None else None
    except RuleViolation as exc:
        raise ConfigError(str(exc)) from None
    with existing_database(settings) as ready:
        try:
            issued = run_async(lambda: with_tenants(ready, lambda s: s.issue_token(
                tenant_id, scope=scope, name=name, expires_in=expires_in)))
        except NotFound as exc:
            raise ConfigError(f"{exc} in {database_label(settings)}") from None
    print(json.dumps(issued.as_json()))
    return 0


def cmd_partitions_maintain(settings: Settings, _args: argparse.Namespace) -> int:
    from cronwire.bootstrap.factories import partition_upkeep

    with any_database(settings) as ready:
        report = run_async(lambda: partition_upkeep(ready))
    print(json.dumps(report))
    return 0


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
    found = on_tenants(settings, lambda store: store.list_tenants())
    return _print_rows(args, [tenant.as_json() for tenant in found], TENANT_COLUMNS)


def cmd_tenant_tokens(settings: Settings, args: argparse.Namespace) -> int:
    tenant_id = _uuid("TENANT_ID", args.tenant_id)
    found = on_tenants(settings, lambda store: store.list_tokens(tenant_id))
    return _print_rows(args, [token.as_json() for token in found], TOKEN_COLUMNS)


def cmd_tenant_revoke(settings: Settings, args: argparse.Namespace) -> int:
    token_id = _uuid("TOKEN_ID", args.token_id)
    revoked = on_tenants(settings, lambda store: store.revoke(token_id))
    print_json(revoked.as_json())
    return 0


MAX_PENDING_RUNS_CEILING = 2**31 - 1  # tenant.max_pending_runs is an integer


def cmd_tenant_limit(settings: Settings, args: argparse.Namespace) -> int:
    tenant_id = _uuid("TENANT_ID", args.tenant_id)
    concurrency_given = args.unlimited or args.max_concurrency is not None
    pending_given = args.default_pending_runs or args.max_pending_runs is not None
    if not (concurrency_given or pending_given):
        raise ConfigError("tenant limit: give --max-concurrency N or --unlimited, and/or "
                          "--max-pending-runs N or --default-pending-runs")
    concurrency = None if args.unlimited else args.max_concurrency
    if concurrency is not None and not 1 <= concurrency <= 1_000_000:
        raise ConfigError("--max-concurrency: must be 1..1000000")
    pending = None if args.default_pending_runs else args.max_pending_runs
    if pending is not None and not 1 <= pending <= MAX_PENDING_RUNS_CEILING:
        raise ConfigError(f"--max-pending-runs: must be 1..{MAX_PENDING_RUNS_CEILING}")

    async def change(store: TenantAdmin) -> dict[str, Any]:
        changed: dict[str, Any] = {}
        if concurrency_given:
            changed = await store.set_max_concurrency(tenant_id, concurrency)
        if pending_given:
            changed = await store.set_max_pending_runs(tenant_id, pending)
        return changed

    print_json(on_tenants(settings, change))
    return 0


def add_operator_commands(commands: argparse._SubParsersAction[Any]) -> None:
    """`serve`, `migrate`, `tenant ...` and `partitions maintain` as commands of `cronwire`."""
    serve = commands.add_parser(
        "serve", help="run one replica: API + planner + executor (SCHEDULER_ROLES selects)"
    )
    serve.set_defaults(handler=cmd_serve)

    migrate = commands.add_parser("migrate", help="apply pending migrations (idempotent)")
    migrate.set_defaults(handler=cmd_migrate)

    tenant = commands.add_parser("tenant", help="manage tenants and API tokens")
    tenant_commands = tenant.add_subparsers(dest="tenant_command", required=True)
    create = tenant_commands.add_parser("create", help="create a tenant and its first token")
    create.add_argument("name", metavar="NAME", help="display name of the tenant")
    create.set_defaults(handler=cmd_tenant_create)
    token = tenant_commands.add_parser(
        "token", help="issue another token for a tenant (admin unless --scope says less)")
    token.add_argument("tenant_id", metavar="TENANT_ID", help="the tenant's UUID")
    token.add_argument("--scope", default="admin", metavar="SCOPE",
                       help="read (every GET), write (read plus changes to schedules and "
                       "runs) or admin (write plus tokens, alerts, audit); default admin")
    token.add_argument("--expires-in", metavar="DURATION",
                       help="e.g. 30d, 12h, 2w (on the database's clock); default never")
    token.add_argument("--name", metavar="NAME", help="what the token is for (the audit "
                       "log shows it)")
    token.set_defaults(handler=cmd_tenant_token)

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

    limit = tenant_commands.add_parser(
        "limit", help="set a tenant's own limits: requests in flight (SCHEDULER_TENANT_MAX_"
        "CONCURRENCY), runs not yet ended (SCHEDULER_TENANT_MAX_PENDING_RUNS); prints the "
        "tenant as JSON",
        description="Set the tenant's own cap on requests in flight, over all its keys, on "
        "every replica; --unlimited goes back to SCHEDULER_TENANT_MAX_CONCURRENCY. It applies "
        "to runs claimed after it (docs/flow-control.md). --max-pending-runs caps the "
        "tenant's runs not yet ended (pending, running, retrying) that backfill, replay and "
        "trigger requests may take it to (429 past it; planned occurrences are never "
        "refused); --default-pending-runs goes back to SCHEDULER_TENANT_MAX_PENDING_RUNS.")
    limit.add_argument("tenant_id", metavar="TENANT_ID", help="the tenant's UUID")
    which = limit.add_mutually_exclusive_group()
    which.add_argument("--max-concurrency", type=int, metavar="N",
                       help="at most N requests of this tenant in flight at once")
    which.add_argument("--unlimited", action="store_true",
                       help="no concurrency limit of its own: the configured default applies")
    pending = limit.add_mutually_exclusive_group()
    pending.add_argument("--max-pending-runs", type=int, metavar="N",
                         help="at most N runs of this tenant not yet ended, as far as "
                         "backfill, replay and trigger requests go")
    pending.add_argument("--default-pending-runs", action="store_true",
                         help="no pending-runs limit of its own: "
                         "SCHEDULER_TENANT_MAX_PENDING_RUNS applies")
    limit.set_defaults(handler=cmd_tenant_limit)

    partitions = commands.add_parser("partitions", help="run-history partition upkeep")
    partition_commands = partitions.add_subparsers(dest="partitions_command", required=True)
    maintain = partition_commands.add_parser(
        "maintain",
        help="create future job_run and audit_event partitions, detach and drop those past "
        "SCHEDULER_RETENTION_MONTHS (runs) and SCHEDULER_AUDIT_RETENTION_DAYS (audit), "
        "delete alert events, audit rows and revisions past SCHEDULER_AUDIT_RETENTION_DAYS "
        "(also runs hourly inside serve)",
    )
    maintain.set_defaults(handler=cmd_partitions_maintain)
