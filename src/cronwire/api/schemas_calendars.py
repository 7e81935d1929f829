"""Bodies of `/v1/calendars` (ADR 0064)."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, Field, StrictInt

from cronwire.api.schemas_common import INPUT_CONFIG, with_examples
from cronwire.api.text import Text
from cronwire.domain.calendar_specs import MAX_DATES, MAX_HOLIDAY_YEARS, NAME_MAX_CHARS

_NAME: dict[str, Any] = {"minLength": 1, "maxLength": NAME_MAX_CHARS}
_HOLIDAYS_HELP = ("Generate the dates from the `holidays` package: the public holidays of "
                  "`country` (ISO 3166-1 code), optionally of one `subdivision` (its code, "
                  f"e.g. `BY` in `DE`), in `years` (at most {MAX_HOLIDAY_YEARS}). The dates are "
                  "computed once, now; the source is kept and shown. Instead of `dates`.")


class HolidaysIn(BaseModel):
    model_config = INPUT_CONFIG

    country: Text = Field(json_schema_extra={"minLength": 2, "maxLength": 16})
    subdivision: Text | None = Field(None, json_schema_extra={"maxLength": 16})
    years: list[StrictInt] = Field(max_length=MAX_HOLIDAY_YEARS, min_length=1)


class CalendarIn(BaseModel):
    model_config = INPUT_CONFIG | with_examples(
        {"name": "de-holidays", "holidays": {"country": "DE", "subdivision": "BY",
                                             "years": [2026, 2027]}},
        {"name": "office-closed", "dates": ["2026-12-24", "2026-12-31"]})

    name: Text = Field(description="Unique among your calendars.", json_schema_extra=_NAME)
    dates: list[date] | None = Field(None, max_length=MAX_DATES,
                                     description=f"The excluded dates (at most {MAX_DATES}).")
    holidays: HolidaysIn | None = Field(None, description=_HOLIDAYS_HELP)


class CalendarPatch(BaseModel):
    """A merge patch: the members present change. New `dates` make it a calendar of dates
    given by hand; a new `holidays` source generates them again. Every live schedule that
    excludes it is re-planned when its dates change."""

    model_config = INPUT_CONFIG | with_examples({"dates": ["2026-12-24"]},
                                                {"holidays": {"country": "DE",
                                                              "years": [2027]}})

    name: Text | None = Field(None, json_schema_extra=_NAME)
    dates: list[date] | None = Field(None, max_length=MAX_DATES)
    holidays: HolidaysIn | None = Field(None, description=_HOLIDAYS_HELP)


class HolidaysOut(BaseModel):
    country: str
    subdivision: str | None
    years: list[int]


class CalendarOut(BaseModel):
    model_config = with_examples({
        "id": "0b8f0c59-1c55-4b8e-9a57-4a1f0e1d2c3b", "name": "de-holidays",
        "dates": ["2026-01-01", "2026-12-25"],
        "holidays": {"country": "DE", "subdivision": None, "years": [2026]},
        "created_at": "2026-12-01T09:00:00Z", "updated_at": "2026-12-01T09:00:00Z"})

    id: uuid.UUID
    name: str
    dates: list[date]
    holidays: HolidaysOut | None = Field(description="The source the dates were generated "
                                         "from; null: given by hand.")
    created_at: datetime
    updated_at: datetime


class CalendarUpdated(CalendarOut):
    replanned_schedules: int = Field(description="Live schedules that exclude it whose runs "
                                     "not yet due were planned again on the new dates.")


class CalendarList(BaseModel):
    items: list[CalendarOut]
