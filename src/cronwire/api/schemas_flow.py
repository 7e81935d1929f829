"""The API's flow-control bodies: a schedule's ``flow_control`` object (in and out) and
``GET /v1/flow-control`` (ADR 0040). Ranges are the domain's
(:mod:`cronwire.domain.flow_control`), which refuses a value out of them by name."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from cronwire.api.text import Text
from cronwire.domain.flow_control import (
    MAX_BURST,
    MAX_CONCURRENCY,
    MAX_KEY_CHARS,
    MAX_RATE_PER_SECOND,
    MIN_RATE_PER_SECOND,
)

FLOW_CONTROL_HELP = (
    "Limits shared by the tenant's schedules with the same `key` (default: the target's "
    "origin), on every replica: at most `max_concurrency` requests in flight, at most "
    "`rate_per_second` started per second (a token bucket of `burst` tokens, default one "
    "second's worth). A run held back stays `pending`. A 429 or 503 with Retry-After holds "
    "the whole key until then. When schedules sharing a key state different limits, the "
    "strictest applies. null: no flow control.")


class FlowControlIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"key": "billing-api", "max_concurrency": 5, "rate_per_second": 20, "burst": 5}]})

    key: Text | None = Field(None, description="null: the target's origin "
                            "(scheme://host:port).",
                            json_schema_extra={"minLength": 1, "maxLength": MAX_KEY_CHARS})
    max_concurrency: StrictInt | None = Field(
        None, json_schema_extra={"minimum": 1, "maximum": MAX_CONCURRENCY})
    # An integer is a number too: StrictFloat alone would refuse 20.
    rate_per_second: StrictInt | StrictFloat | None = Field(
        None, json_schema_extra={"minimum": MIN_RATE_PER_SECOND,
                                 "maximum": MAX_RATE_PER_SECOND})
    burst: StrictInt | None = Field(None, description="Needs rate_per_second.",
                                    json_schema_extra={"minimum": 1, "maximum": MAX_BURST})


class FlowControlOut(BaseModel):
    key: str = Field(description="The key the schedule's runs count under (the target's "
                     "origin when none was given).")
    max_concurrency: int | None
    rate_per_second: float | None
    burst: int | None


class FlowKeyOut(BaseModel):
    key: str
    max_concurrency: int | None = Field(description="The strictest of the key's schedules'.")
    rate_per_second: float | None
    in_flight: int = Field(description="Requests of this key in flight now.")
    waiting: int = Field(description="Runs of this key due and not started.")
    held_until: datetime | None = Field(description="A receiver's Retry-After holds the key "
                                        "until then; null when not held.")


class FlowControlPage(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"items": [
        {"key": "billing-api", "max_concurrency": 5, "rate_per_second": 20.0, "in_flight": 5,
         "waiting": 120, "held_until": None}]}]})

    items: list[FlowKeyOut]
