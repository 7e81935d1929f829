"""`cronwire tokens create|list|revoke` and `cronwire audit list` over the API (ADR 0056).
Like the other tenant commands they only build requests from flags named after the API's
fields and print what it answers; every one needs an admin token."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from cronwire.cli.api_client import (
    ApiClient,
    Handler,
    client_command,
    connection_options,
    id_argument,
    pages,
)
from cronwire.cli.output import Column, field, render_fields, show, show_page
from cronwire.domain.access import Scope, parse_expires_in
from cronwire.domain.delivery import rfc3339_utc
from cronwire.domain.errors import RuleViolation

TOKEN_COLUMNS = [
    Column("ID", field("id")), Column("NAME", field("name")), Column("SCOPE", field("scope")),
    Column("PREFIX", field("prefix")), Column("EXPIRES (UTC)", field("expires_at")),
    Column("LAST USED (UTC)", field("last_used_at")),
]


def _actor(row: Mapping[str, Any]) -> str:
    actor = row.get("actor") or {}
    if actor.get("operator"):
        return f"operator:{actor['operator']}"
    return str(actor.get("token_name") or actor.get("token_id"))


def _changed(row: Mapping[str, Any]) -> str:
    return ", ".join(sorted(row.get("changes") or {}))


AUDIT_COLUMNS = [
    Column("AT (UTC)", field("at")), Column("ACTION", field("action")),
    Column("OBJECT", field("object_id")), Column("ACTOR", _actor),
    Column("FIELDS", _changed), Column("CLIENT", field("client_address")),
]


def expires_in_flag(text: str) -> str:
    """`--expires-in 30d` as the RFC 3339 instant it names (from this machine's clock)."""
    try:
        length = parse_expires_in("--expires-in", text)
    except RuleViolation as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
    return rfc3339_utc(datetime.now(UTC).replace(microsecond=0) + length)


def tokens_create(client: ApiClient, args: argparse.Namespace) -> None:
    body = {"name": args.name, "scope": args.scope, "expires_at": args.expires_in}
    show(args, client.call("POST", "/v1/tokens", body=body), render_fields)


def tokens_list(client: ApiClient, args: argparse.Namespace) -> None:
    show_page(args, client.call("GET", "/v1/tokens"), TOKEN_COLUMNS)


def tokens_revoke(client: ApiClient, args: argparse.Namespace) -> None:
    client.call("DELETE", f"/v1/tokens/{args.id}")
    show(args, {"id": args.id, "revoked": True}, render_fields)


def audit_list(client: ApiClient, args: argparse.Namespace) -> None:
    params = {"since": args.since, "until": args.until, "object_id": args.object_id,
              "action": args.action, "limit": args.limit, "cursor": args.cursor}
    show_page(args, pages(client, "/v1/audit", params, args.all), AUDIT_COLUMNS)


REVISION_COLUMNS = [
    Column("VERSION", field("version")), Column("AT (UTC)", field("at")),
    Column("ACTOR", _actor), Column("FIELDS", _changed),
]


def schedules_revisions(client: ApiClient, args: argparse.Namespace) -> None:
    found = client.call("GET", f"/v1/schedules/{args.id}/revisions",
                        params={"limit": args.limit})
    show_page(args, found, REVISION_COLUMNS)


def if_match(version: int | None) -> dict[str, str] | None:
    """The If-Match header naming ``version`` (none for None)."""
    return None if version is None else {"If-Match": f'"{version}"'}


def schedules_restore(client: ApiClient, args: argparse.Namespace) -> None:
    show(args, client.call("POST", f"/v1/schedules/{args.id}/revisions/{args.version}/restore",
                           headers=if_match(args.if_match)), render_fields)


def add_revision_actions(action: Callable[..., argparse.ArgumentParser],
                         update: argparse.ArgumentParser) -> None:
    """`schedules revisions ID`, `schedules restore ID VERSION` and `schedules update
    --if-match`; ``action`` is the `schedules` subcommand factory."""
    update.add_argument("--if-match", type=int, metavar="VERSION",
                        help="change it only if it is still at this version (its `version`); "
                        "else the API refuses with the current one (exit 1)")
    revisions = action("revisions", "a schedule's versions, newest first: when, who, which "
                       "fields changed", schedules_revisions)
    id_argument(revisions, "schedule")
    revisions.add_argument("--limit", type=int, default=100, metavar="N",
                           help="versions shown, 1..1000 (default: 100)")
    restore = action("restore", "make an earlier version's definition current (a new "
                     "version)", schedules_restore)
    id_argument(restore, "schedule")
    restore.add_argument("version", metavar="VERSION", type=int,
                         help="the version to bring back (from `schedules revisions`)")
    restore.add_argument("--if-match", type=int, metavar="VERSION",
                         help="only if the schedule is still at this version")


def add_access_commands(commands: argparse._SubParsersAction[Any], group_help: str) -> None:
    """`tokens create|list|revoke` and `audit list` as top-level commands of `cronwire`."""
    api = connection_options(url_is_api=True)

    def group(name: str, help_text: str) -> Any:
        parser = commands.add_parser(name, help=help_text,
                                     description=help_text[0].upper() + help_text[1:]
                                     + " over the API (an admin token). " + group_help)
        return parser.add_subparsers(dest=f"{name}_command", required=True,
                                     parser_class=type(parser), metavar="ACTION")

    def action(actions: Any, name: str, help_text: str,
               handler: Handler) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(
            name, parents=[api], help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".")
        parser.set_defaults(handler=client_command(handler))
        return parser

    tokens = group("tokens", "tenants: the tenant's own API tokens and their scopes")
    create = action(tokens, "create", "issue a token; prints it (once) with its id",
                    tokens_create)
    create.add_argument("--name", required=True, metavar="NAME",
                        help="what the token is for (the audit log shows it)")
    create.add_argument("--scope", choices=[s.value for s in Scope], default=Scope.READ.value,
                        help="read: every GET; write: read plus changes to schedules and "
                        "runs; admin: write plus tokens, alerts, audit (default: read)")
    create.add_argument("--expires-in", type=expires_in_flag, metavar="DURATION",
                        help="e.g. 30d, 12h, 2w: the token answers 401 after that")
    action(tokens, "list", "the tenant's tokens not revoked (never the token itself)",
           tokens_list)
    id_argument(action(tokens, "revoke", "revoke a token at once, on every replica",
                       tokens_revoke), "token")

    audit = group("audit", "tenants: who changed what, newest first")
    listing = action(audit, "list", "the audit log, newest first", audit_list)
    listing.add_argument("--since", metavar="TIME", help="RFC 3339; entries at or after it")
    listing.add_argument("--until", metavar="TIME", help="RFC 3339; entries before it")
    listing.add_argument("--object-id", metavar="ID", help="only this object's entries")
    listing.add_argument("--action", metavar="ACTION", help="e.g. schedule.update")
    listing.add_argument("--limit", type=int, default=50, metavar="N",
                         help="entries per page, 1..200 (default: 50)")
    listing.add_argument("--cursor", metavar="CURSOR",
                         help="continue after this page (next_cursor of the previous one)")
    listing.add_argument("--all", action="store_true", help="every page, not only the first")
