"""The tenant API's run-history use cases over the RunHistory port."""

from __future__ import annotations

import dataclasses
import uuid

from cronwire.domain.errors import RuleViolation
from cronwire.domain.history import RunDetail, RunQuery, RunView
from cronwire.domain.keyset import Page, page_of
from cronwire.ports import RunHistory


async def list_runs(history: RunHistory, tenant: uuid.UUID, query: RunQuery) -> Page[RunView]:
    """``query.limit`` runs at most, newest first; ``until`` must come after ``since``."""
    if query.since is not None and query.until is not None and not query.since < query.until:
        raise RuleViolation("until", "must be later than since")
    found = await history.list(tenant, dataclasses.replace(query, limit=query.limit + 1))
    return page_of(found, query.limit)


async def get_run(history: RunHistory, tenant: uuid.UUID, run_id: uuid.UUID) -> RunDetail:
    """One of the tenant's runs with its attempts, oldest first; NotFound otherwise."""
    return await history.get(tenant, run_id)
