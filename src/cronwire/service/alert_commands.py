"""The tenant's alert use cases: set and read the destination, list the events."""

from __future__ import annotations

import dataclasses
import uuid

from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.alerts import AlertDestination, AlertEvent, EventAttempt, checked_events
from cronwire.domain.delivery import new_signing_secret
from cronwire.domain.errors import InvalidTarget, NotFound, RuleViolation, TargetRefused
from cronwire.domain.keyset import HistoryPosition, Page, page_of
from cronwire.ports import AlertStore
from cronwire.service.schedule_commands import UrlCheck


async def set_destination(store: AlertStore, check_url: UrlCheck, tenant: uuid.UUID,
                          url: str, events: list[str] | None,
                          change: Change = BY_SYSTEM) -> AlertDestination:
    """Validate like a schedule's target (the same address policy: alerts are delivered
    by the same guarded client), then store with a fresh secret, returned this once."""
    chosen = checked_events(events)
    try:
        await check_url(url)
    except (InvalidTarget, TargetRefused) as exc:  # they name target.url; here it is url
        raise RuleViolation("url", str(exc).split(": ", 1)[-1]) from None
    return await store.set_destination(tenant, url, chosen, new_signing_secret(), change)


async def destination(store: AlertStore, tenant: uuid.UUID) -> AlertDestination:
    found = await store.destination(tenant)
    if found is None:
        raise NotFound("no alert destination set; PUT /v1/alerts sets one")
    return dataclasses.replace(found, signing_secret="")


async def list_events(store: AlertStore, tenant: uuid.UUID, *, before: HistoryPosition | None,
                      limit: int) -> Page[tuple[AlertEvent, tuple[EventAttempt, ...]]]:
    return page_of(await store.list_events(tenant, before=before, limit=limit + 1), limit)
