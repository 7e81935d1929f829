"""Schedule versions over HTTP: ``ETag: "N"`` on what shows a schedule, ``If-Match`` on
what changes one (a stale one answers 412 with the current version; api/errors.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Response

from cronwire.domain.errors import RuleViolation

MAX_VERSION_DIGITS = 18
IfMatch = Annotated[str | None, Header(
    alias="If-Match", description="The version this change was made against, as the ETag "
    "gave it (`\"3\"`); a schedule changed meanwhile answers 412 with its current version "
    "in `ETag`. Absent (or `*`): no check.")]


def parse_if_match(raw: str | None) -> int | None:
    """The version an If-Match names; None for none or ``*``; RuleViolation otherwise."""
    if raw is None or raw.strip() == "*":
        return None
    text = raw.strip().removeprefix("W/").strip('"')
    if not text.isdigit() or len(text) > MAX_VERSION_DIGITS:
        raise RuleViolation("If-Match", f'expected a version as the ETag gives it, e.g. "3", '
                            f"got {raw[:40]!r}")
    return int(text)


def tag(response: Response, version: int) -> None:
    response.headers["ETag"] = f'"{version}"'
