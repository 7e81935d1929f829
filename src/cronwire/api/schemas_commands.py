"""Bodies of the routes that act on schedules and runs beyond CRUD: pause with a note,
backfill, replay. Same conventions as :mod:`cronwire.api.schemas_schedule_input` (types
only; the rules are the domain's, and the bounds shown are read from it)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, StrictBool, StrictInt

from cronwire.api.schemas_common import INPUT_CONFIG, Instant, with_examples
from cronwire.api.schemas_schedule_input import OVERLAP_ENUM
from cronwire.api.text import Text
from cronwire.domain.backfill import FIRST_SHOWN, MAX_BACKFILL
from cronwire.domain.replay import DEFAULT_REPLAY, MAX_REPLAY
from cronwire.domain.schedule_rules import PAUSE_NOTE_MAX_CHARS


class PauseIn(BaseModel):
    model_config = INPUT_CONFIG | with_examples({"note": "target migrating to v2; back on Monday"})

    note: Text | None = Field(None, description="Kept as the schedule's paused_reason.",
                              json_schema_extra={"minLength": 1,
                                                 "maxLength": PAUSE_NOTE_MAX_CHARS})


class ResumeIn(BaseModel):
    model_config = INPUT_CONFIG | with_examples({"dry_run": True})

    dry_run: StrictBool = Field(False, description="Count the runs a resume would make due "
                                "at once; change nothing.")


class BackfillIn(BaseModel):
    model_config = INPUT_CONFIG | with_examples({"start": "2027-03-01T00:00:00Z",
                                       "end": "2027-03-02T00:00:00Z", "dry_run": True})

    start: Instant = Field(description="Inclusive.")
    end: Instant = Field(description="Exclusive; not later than now.")
    overlap_policy: Text | None = Field(None, description="For the backfill's runs; "
                                        "default: the schedule's.", json_schema_extra=OVERLAP_ENUM)
    dry_run: StrictBool = Field(False, description="Count and list, write nothing.")


class BackfillOut(BaseModel):
    model_config = with_examples({"occurrences": 24, "created": 23, "existing": 1,
                              "first": ["2027-03-01T00:00:00Z", "2027-03-01T01:00:00Z"]})

    occurrences: int = Field(description=f"Occurrences in [start, end) (at most "
                             f"{MAX_BACKFILL:,}).")
    created: int = Field(description="Runs written (0 for a dry run).")
    existing: int = Field(description="Occurrences that already had a run; kept as they are.")
    first: list[datetime] = Field(description=f"The first {FIRST_SHOWN} occurrences.")
    over_limit: str | None = Field(
        None, description="A dry run: the limit the real backfill would be refused by "
        "(`max_pending_runs`: the tenant's runs not yet ended), else null.")


class ReplayIn(BaseModel):
    model_config = INPUT_CONFIG | with_examples({"status": "failed", "since": "2027-03-01T00:00:00Z",
                                       "limit": 100})

    schedule_id: uuid.UUID | None = None
    status: Literal["failed"] = Field(description="Dead letters are failed runs.")
    since: Instant | None = Field(None, description="Inclusive lower bound on scheduled_for.")
    until: Instant | None = Field(None, description="Exclusive upper bound on scheduled_for.")
    limit: StrictInt = Field(DEFAULT_REPLAY, json_schema_extra={"minimum": 1,
                                                                "maximum": MAX_REPLAY})


class ReplayOut(BaseModel):
    model_config = with_examples({"replayed": 1, "runs": ["6a1c0f55-4e0b-5c1d-8a7e-2b3c4d5e6f70"]})

    replayed: int
    runs: list[uuid.UUID] = Field(description="The new runs, oldest original first.")
