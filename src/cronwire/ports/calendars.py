"""The calendar port (ADR 0064). Re-exported by :mod:`cronwire.ports`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol
from uuid import UUID

from cronwire.domain.access import Change
from cronwire.domain.calendar_specs import CalendarRecord, CalendarSpec
from cronwire.domain.calendars import Exclusions
from cronwire.domain.schedules import ScheduleSpec


class CalendarStore(Protocol):
    """A tenant's calendars. Every method is confined to the tenant: another tenant's
    calendar is NotFound. Each change writes its audit row (``change``) in its
    transaction. StorageError when the database fails."""

    async def create(self, tenant_id: UUID, spec: CalendarSpec, *,
                     change: Change = ...) -> CalendarRecord:
        """Insert a validated calendar; LimitExceeded ("max_calendars") past the
        tenant's cap, StateConflict for a name the tenant already uses."""
        ...

    async def list(self, tenant_id: UUID) -> Sequence[CalendarRecord]:
        """The tenant's calendars by name (at most its cap)."""
        ...

    async def get(self, tenant_id: UUID, calendar_id: UUID) -> CalendarRecord: ...

    async def update(self, tenant_id: UUID, calendar_id: UUID,
                     revise: Callable[[CalendarSpec], CalendarSpec], *,
                     change: Change = ...) -> tuple[CalendarRecord, int]:
        """Apply ``revise`` (pure; a domain error rolls back) to the locked calendar and,
        if its dates changed, re-plan every live schedule that excludes it in the same
        transaction: the runs they wrote ahead on the old dates are taken back and their
        cursors move on the new ones. Returns the calendar and how many schedules were
        re-planned. StateConflict for a name another calendar has."""
        ...

    async def delete(self, tenant_id: UUID, calendar_id: UUID, *,
                     change: Change = ...) -> None:
        """Delete it; StateConflict naming the live schedules that still exclude it."""
        ...

    async def exclusions(self, tenant_id: UUID, spec: ScheduleSpec) -> Exclusions:
        """The dates ``spec`` excludes, with its policy; RuleViolation naming
        ``exclude_calendars`` for a calendar that is not the tenant's."""
        ...
