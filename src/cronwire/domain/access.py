"""Who may do what (token scopes) and who did it (the actor of a change): pure data.

A token's scope is one of three nested grants (CONTRACT "Tokens, audit and revisions"):
``read`` every GET; ``write`` read plus every change to schedules and runs; ``admin`` write
plus tokens, the alert destination and the audit log. Each route declares the scope it
needs beside itself (api/auth.py); these rules only compare two scopes.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from cronwire.domain.errors import RuleViolation


class Scope(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


_RANK = {Scope.READ: 0, Scope.WRITE: 1, Scope.ADMIN: 2}
TOKEN_NAME_MAX_CHARS = 100
MAX_LIVE_TOKENS = 100  # per tenant: GET /v1/tokens is one page, never a walk
# `--expires-in 30d`: a whole number and a unit (seconds, minutes, hours, days, weeks).
_DURATION = re.compile(r"([1-9][0-9]{0,6})([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
MAX_EXPIRY = timedelta(days=3650)


def covers(held: Scope, needed: Scope) -> bool:
    """Whether a token of scope ``held`` may do what needs ``needed``."""
    return _RANK[held] >= _RANK[needed]


def strongest(scopes: list[str]) -> Scope:
    """The scope a route needs from the scopes its dependencies declare (read if none)."""
    chosen = [Scope(s) for s in scopes]
    return max(chosen, key=_RANK.__getitem__, default=Scope.READ)


def parse_scope(field: str, raw: str) -> Scope:
    try:
        return Scope(raw)
    except ValueError:
        raise RuleViolation(field, f"must be one of read, write, admin, got {raw!r}") from None


def parse_expires_in(field: str, raw: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` as a duration (at most ten years)."""
    match = _DURATION.fullmatch(raw.strip())
    if match is None:
        raise RuleViolation(field, f"expected a number and a unit (s, m, h, d, w) like 30d, "
                                   f"got {raw!r}")
    length = timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    if length > MAX_EXPIRY:
        raise RuleViolation(field, "at most 3650d")
    return length


def check_token_name(field: str, name: str) -> str:
    if not name.strip() or len(name) > TOKEN_NAME_MAX_CHARS:
        raise RuleViolation(field, f"1 to {TOKEN_NAME_MAX_CHARS} characters, not blank")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise RuleViolation(field, "no control characters")
    return name


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change: a token (its id and name) or an operator command."""

    token_id: uuid.UUID | None = None
    token_name: str | None = None
    operator: str | None = None

    def as_document(self) -> dict[str, Any]:
        if self.token_id is not None:
            return {"token_id": str(self.token_id), "token_name": self.token_name}
        return {"operator": self.operator or "system"}


OPERATOR_CLI = Actor(operator="cli")
# Changes made by cronwire's own code paths that are not a request (tests, tooling).
SYSTEM = Actor(operator="system")


@dataclass(frozen=True, slots=True)
class Change:
    """What the audit log records about the origin of one change."""

    actor: Actor
    request_id: str | None = None
    client_address: str | None = None


BY_OPERATOR = Change(OPERATOR_CLI)
BY_SYSTEM = Change(SYSTEM)


@dataclass(frozen=True, slots=True)
class Grant:
    """What a bearer token grants, as the token store found it."""

    tenant_id: uuid.UUID
    token_id: uuid.UUID
    name: str | None
    scope: Scope
    expired: bool  # expires_at has passed on the database's clock
    expires_at: datetime | None = None


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """What anyone may see of a token: never the token, never its hash."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    prefix: str | None
    name: str | None
    scope: Scope
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None

    def as_json(self) -> dict[str, Any]:
        return {"id": str(self.id), "tenant_id": str(self.tenant_id), "prefix": self.prefix,
                "name": self.name, "scope": self.scope.value,
                "created_at": _iso(self.created_at), "expires_at": _iso(self.expires_at),
                "last_used_at": _iso(self.last_used_at), "revoked_at": _iso(self.revoked_at)}
