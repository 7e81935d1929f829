"""A tenant's calendar as the API creates and shows it, and the rules it must keep
(ADR 0064). Pure: the ``holidays`` package computes dates, it reads nothing.

A calendar is a named set of dates, given as a list or generated at create time from
the ``holidays`` package (country, optional subdivision, years); the generating source is
kept beside the dates so a read shows where they came from. Every size is bounded so that
no tenant's calendar can make a shared statement (the planner's) slow: its name, its
dates, the years a source may span, the calendars a tenant may keep and a schedule may
exclude.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

from cronwire.domain.errors import RuleViolation
from cronwire.domain.labels import check_label

NAME_MAX_CHARS = 100
MAX_DATES = 1000
MAX_HOLIDAY_YEARS = 10
FIRST_YEAR, LAST_YEAR = 1970, 2200
MAX_CALENDARS_PER_TENANT = 100
MAX_CALENDARS_PER_SCHEDULE = 10
_CODE_MAX_CHARS = 16


@dataclass(frozen=True, slots=True)
class HolidaySource:
    """Public holidays of ``country`` (ISO 3166-1 code), optionally of one
    ``subdivision`` (the package's code for it), in ``years``."""

    country: str
    years: tuple[int, ...]
    subdivision: str | None = None

    def to_document(self) -> dict[str, Any]:
        return {"country": self.country, "subdivision": self.subdivision,
                "years": list(self.years)}

    @staticmethod
    def from_document(doc: dict[str, Any] | None) -> HolidaySource | None:
        if doc is None:
            return None
        return HolidaySource(doc["country"], tuple(doc["years"]), doc.get("subdivision"))


@dataclass(frozen=True, slots=True)
class CalendarSpec:
    """What the tenant controls: the name and the dates (sorted, unique), and the source
    they were generated from (None: given by hand)."""

    name: str
    dates: tuple[date, ...] = ()
    holidays: HolidaySource | None = None


@dataclass(frozen=True, slots=True)
class CalendarRecord:
    id: uuid.UUID
    tenant_id: uuid.UUID
    spec: CalendarSpec
    created_at: datetime
    updated_at: datetime


def check_dates(dates: Sequence[date], field_name: str = "dates") -> tuple[date, ...]:
    """Sorted and unique, at most MAX_DATES, each within FIRST_YEAR..LAST_YEAR."""
    unique = tuple(sorted(set(dates)))
    if len(unique) > MAX_DATES:
        raise RuleViolation(field_name, f"at most {MAX_DATES} dates per calendar "
                                        f"({len(unique)} given)")
    for day in unique:
        if not FIRST_YEAR <= day.year <= LAST_YEAR:
            raise RuleViolation(field_name, f"{day.isoformat()} is outside the years "
                                            f"{FIRST_YEAR}..{LAST_YEAR}")
    return unique


def check_years(years: Sequence[int]) -> tuple[int, ...]:
    unique = tuple(sorted(set(years)))
    if not unique:
        raise RuleViolation("holidays.years", "give at least one year")
    if len(unique) > MAX_HOLIDAY_YEARS:
        raise RuleViolation("holidays.years", f"at most {MAX_HOLIDAY_YEARS} years")
    for year in unique:
        if not FIRST_YEAR <= year <= LAST_YEAR:
            raise RuleViolation("holidays.years",
                                f"{year} is outside {FIRST_YEAR}..{LAST_YEAR}")
    return unique


def holiday_dates(source: HolidaySource) -> tuple[HolidaySource, tuple[date, ...]]:
    """The source (normalised) and its dates, from the ``holidays`` package. An unknown
    country or subdivision is a RuleViolation naming ``holidays.country`` or
    ``holidays.subdivision``."""
    import holidays  # imported on first use: its country tables take a moment to load

    years = check_years(source.years)
    country = source.country.strip().upper()
    supported = holidays.list_supported_countries()
    if len(country) > _CODE_MAX_CHARS or country not in supported:
        raise RuleViolation("holidays.country", f"{source.country[:_CODE_MAX_CHARS]!r} is not "
                            "a country the holidays package knows (an ISO 3166-1 code)")
    subdivision = source.subdivision
    if subdivision is not None:
        known = {code.upper(): code for code in supported[country]}
        found = known.get(subdivision.strip().upper())
        if found is None:
            raise RuleViolation("holidays.subdivision", f"{subdivision[:_CODE_MAX_CHARS]!r} is "
                                f"not a subdivision of {country}; known: "
                                f"{', '.join(sorted(supported[country])[:60]) or 'none'}")
        subdivision = found
    table = holidays.country_holidays(country, subdiv=subdivision, years=list(years))
    dates = check_dates(list(table.keys()), "holidays.years")
    return HolidaySource(country, years, subdivision), dates


def validated(spec: CalendarSpec, before: CalendarSpec | None = None) -> CalendarSpec:
    """The spec, normalised, if every rule holds: dates generated from ``holidays`` when
    it is given (then the dates given are refused), else checked as given."""
    if before is None or spec.name != before.name:
        check_label("name", spec.name, NAME_MAX_CHARS)
    spec = replace(spec, name=spec.name.strip())
    unchanged = before is not None and spec.holidays == before.holidays
    if spec.holidays is not None and not unchanged:
        source, dates = holiday_dates(spec.holidays)
        return replace(spec, holidays=source, dates=dates)
    return replace(spec, dates=check_dates(spec.dates))


def check_calendar_ids(ids: Sequence[uuid.UUID]) -> tuple[uuid.UUID, ...]:
    """A schedule's ``exclude_calendars``: unique, in the order given, at most
    MAX_CALENDARS_PER_SCHEDULE."""
    unique = tuple(dict.fromkeys(ids))
    if len(unique) > MAX_CALENDARS_PER_SCHEDULE:
        raise RuleViolation("exclude_calendars",
                            f"at most {MAX_CALENDARS_PER_SCHEDULE} calendars per schedule")
    return unique


def calendar_fields(spec: CalendarSpec | None) -> dict[str, Any] | None:
    """What the audit log compares between two states of a calendar (None: absent)."""
    if spec is None:
        return None
    return {"name": spec.name, "dates": [day.isoformat() for day in spec.dates],
            "holidays": spec.holidays.to_document() if spec.holidays else None}
