"""Bodies of the tokens and audit routes (ADR 0056)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from cronwire.api.schemas_common import INPUT_CONFIG, Instant, with_examples

ScopeName = Literal["read", "write", "admin"]


class TokenIn(BaseModel):
    model_config = INPUT_CONFIG | with_examples(
        {"name": "grafana", "scope": "read", "expires_at": "2027-06-01T00:00:00Z"})

    name: str = Field(description="What the token is for (1..100 characters); the audit "
                      "log shows it beside every change the token makes.")
    scope: ScopeName = Field(description="read: every GET; write: read plus every change "
                             "to schedules and runs; admin: write plus tokens, the alert "
                             "destination and the audit log.")
    expires_at: Instant | None = Field(None, description="After this instant the token "
                                       "answers 401 (\"expired\"); must lie in the future.")


class TokenOut(BaseModel):
    id: str
    name: str | None
    scope: ScopeName
    prefix: str | None = Field(description="The token's first characters, to recognise it.")
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None = Field(description="Kept to the minute.")


class TokenCreated(TokenOut):
    token: str = Field(description="The token itself, shown only in this answer.")


class TokenList(BaseModel):
    items: list[TokenOut]


ACTOR_HELP = ('Who made the change: `{"token_id", "token_name"}` for a request, or '
              '`{"operator": "cli"}` for `cronwire tenant ...`.')


class AuditEventOut(BaseModel):
    id: str
    at: datetime
    actor: dict[str, Any] = Field(description=ACTOR_HELP)
    action: str = Field(examples=["schedule.update"])
    object_type: str = Field(examples=["schedule"])
    object_id: str | None
    request_id: str | None
    client_address: str | None
    changes: dict[str, list[Any]] = Field(description="field -> [before, after]; sealed "
                                          "values (header values, secrets) read \"***\".")


class AuditPage(BaseModel):
    items: list[AuditEventOut]
    next_cursor: str | None


class RevisionOut(BaseModel):
    version: int
    at: datetime
    actor: dict[str, Any] = Field(description=ACTOR_HELP)
    changes: dict[str, list[Any]]


class RevisionList(BaseModel):
    items: list[RevisionOut]
