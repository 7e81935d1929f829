"""Bodies of the run routes: a run, its attempts' evidence, and a page of runs, with the
examples /openapi.json shows. Output only: the run filters are query parameters."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from cronwire.api.schemas import EXAMPLE_SCHEDULE
from cronwire.api.schemas_common import with_examples

RunStatusName = Literal[
    "pending", "running", "retrying", "succeeded", "failed", "skipped", "cancelled"
]

EXAMPLE_RUN: dict[str, Any] = {
    "id": "6a1c0f55-4e0b-5c1d-8a7e-2b3c4d5e6f70",
    "schedule_id": EXAMPLE_SCHEDULE["id"], "scheduled_for": "2027-03-28T01:00:00Z",
    "status": "succeeded", "attempt_count": 1, "fire_after": "2027-03-28T01:00:00Z",
    "first_attempt_at": "2027-03-28T01:00:00.012Z", "finished_at": "2027-03-28T01:00:00.140Z",
    "last_status_code": 200, "last_error": None, "trigger": "schedule",
    "skip_reason": None, "replay_of": None, "replayed_by": None,
}
EXAMPLE_ATTEMPT: dict[str, Any] = {
    "attempt": 1, "started_at": "2027-03-28T01:00:00.012Z",
    "finished_at": "2027-03-28T01:00:00.140Z", "outcome": "success", "status_code": 200,
    "error": None, "duration_ms": 128, "response_excerpt": "{\"ok\":true}",
}


class RunOut(BaseModel):
    model_config = with_examples(EXAMPLE_RUN)

    id: uuid.UUID
    schedule_id: uuid.UUID
    scheduled_for: datetime
    status: RunStatusName
    attempt_count: int
    fire_after: datetime
    first_attempt_at: datetime | None
    finished_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    trigger: Literal["schedule", "manual", "backfill", "replay"]
    skip_reason: str | None = Field(description="On a skipped run: `overlap` (the overlap "
                                    "policy) or `misfire` (missed while nothing ran); else "
                                    "null.")
    replay_of: uuid.UUID | None = Field(description="On a replay: the failed run it "
                                        "repeats; else null.")
    replayed_by: uuid.UUID | None = Field(description="On a failed run that was replayed: "
                                          "its replay; else null.")


class AttemptOut(BaseModel):
    model_config = with_examples(EXAMPLE_ATTEMPT)

    attempt: int
    started_at: datetime
    finished_at: datetime
    outcome: str
    status_code: int | None
    error: str | None
    duration_ms: int
    response_excerpt: str | None = Field(description="At most 1 KiB of the response body.")


class RunDetailOut(RunOut):
    model_config = with_examples({**EXAMPLE_RUN, "attempts": [EXAMPLE_ATTEMPT]})

    attempts: list[AttemptOut] = Field(description="At most 8, oldest first.")


class RunPage(BaseModel):
    model_config = with_examples({"items": [EXAMPLE_RUN], "next_cursor": None})

    items: list[RunOut]
    next_cursor: str | None

