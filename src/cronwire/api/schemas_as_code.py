"""Bodies of the schedules-as-code routes (ADR 0057): a schedule's definition as PUT by
key and apply take it, the apply request, and the apply's answer."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, StrictBool

from cronwire.api.schemas_common import INPUT_CONFIG, with_examples
from cronwire.api.schemas_schedule_input import (
    EXAMPLE_CREATE,
    KEY_HELP,
    KEY_SCHEMA,
    MANAGED_BY_HELP,
    MANAGED_BY_SCHEMA,
    ScheduleCreate,
)
from cronwire.api.text import Text
from cronwire.domain.apply_plan import MAX_APPLY_SCHEDULES

_PAUSED_HELP = ("true or false: the schedule is paused or active after this; absent: a "
                "new schedule starts active and an existing one keeps its pause (so a pause "
                "made by hand in an incident survives an apply that does not mention it).")
EXAMPLE_DEFINITION = {**{k: v for k, v in EXAMPLE_CREATE.items() if k != "paused"},
                      "managed_by": "git:acme/schedules"}


class ScheduleDefinition(ScheduleCreate):
    """A whole schedule, as PUT by key replaces one: a field left out takes its default."""

    model_config = INPUT_CONFIG | with_examples(EXAMPLE_DEFINITION)

    paused: StrictBool | None = Field(None, description=_PAUSED_HELP)  # type: ignore[assignment]


class ApplyItem(ScheduleDefinition):
    model_config = INPUT_CONFIG | with_examples({**EXAMPLE_DEFINITION, "key": "nightly-report"})

    key: Text = Field(description=KEY_HELP, json_schema_extra=KEY_SCHEMA)


class ApplyIn(BaseModel):
    model_config = INPUT_CONFIG | with_examples(
        {"schedules": [{**EXAMPLE_DEFINITION, "key": "nightly-report"}],
         "managed_by": "git:acme/schedules", "prune": True, "dry_run": True})

    schedules: list[ApplyItem] = Field(
        max_length=MAX_APPLY_SCHEDULES,
        description=f"Every schedule the apply defines (at most {MAX_APPLY_SCHEDULES:,}), "
        "matched to the tenant's by `key`.")
    managed_by: Text | None = Field(
        None, description=MANAGED_BY_HELP + " Set on every schedule listed (one that states "
        "another is refused); needed for prune.", json_schema_extra=MANAGED_BY_SCHEMA)
    prune: StrictBool = Field(False, description="Also delete the schedules of this "
                              "`managed_by` whose key is not listed (never another "
                              "managed_by's, never a schedule without one).")
    dry_run: StrictBool = Field(False, description="Say what the apply would do; write "
                                "nothing.")


class ScheduleChanges(BaseModel):
    key: str
    changes: dict[str, list[Any]] = Field(
        description="`{field: [before, after]}`, dotted field names; header values show "
        "as `\"***\"`.")


class ApplyOut(BaseModel):
    model_config = with_examples({
        "created": ["nightly-report"],
        "updated": [{"key": "hourly-sync", "changes": {"cron": ["0 * * * *", "30 * * * *"]}}],
        "deleted": ["old-export"], "unchanged": 41, "dry_run": False,
        "signing_secrets": {"nightly-report": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})

    created: list[str]
    updated: list[ScheduleChanges]
    deleted: list[str]
    unchanged: int
    dry_run: bool
    signing_secrets: dict[str, str] = Field(
        description="The signing secret of each schedule this apply created, by key, shown "
        "only here (empty on a dry run); `rotate-secret` makes a new one.")
