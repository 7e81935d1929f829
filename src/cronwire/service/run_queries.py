"""The tenant API's run-history use case over the RunHistory port."""

from __future__ import annotations

import dataclasses
import uuid

from cronwire.domain.errors import RuleViolation
from cronwire.domain.history import RunQuery, RunView
from cronwire.ports import RunHistory
from cronwire.service.schedule_commands import Page, page_of


async def list_runs(history: RunHistory, tenant: uuid.UUID, query: RunQuery) -> Page[RunView]:
    """``query.limit`` runs at most, newest first; ``until`` must come after ``since``."""
    if query.since is not None and query.until is not None and not query.since < query.until:
        raise RuleViolation("until", "must be later than since")
    found = await history.list(tenant, dataclasses.replace(query, limit=query.limit + 1))
    return page_of(found, query.limit)
