"""Flow control as a tenant states it: a key and its limits (pure data and rules, no I/O).

Schedules of one tenant that share a ``key`` share its limits (the strictest any of them
states) on every replica: at most ``max_concurrency`` requests in flight, at most
``rate_per_second`` started per second (a token bucket holding ``burst`` tokens). The key
defaults to the target's origin, the breaker's unit. Where the limits are enforced, and
why there, is ADR 0040; the claim statements do it (queries/job_run.sql).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronwire.domain.breaker import target_key
from cronwire.domain.errors import RuleViolation
from cronwire.domain.labels import check_label

FIELD = "flow_control"
MAX_KEY_CHARS = 200
MAX_CONCURRENCY = 10_000
MAX_RATE_PER_SECOND = 10_000.0
# The floor keeps the token bucket's arithmetic inside the claim statements (which serve
# every tenant) free of float underflow: rate x the smallest elapsed time Postgres can see
# (1 us) stays a normal float8. One token a day is still allowed.
MIN_RATE_PER_SECOND = 0.00001
MAX_BURST = 10_000
# The tenant's own row in the flow_control table carries this key; a tenant's key never
# does (it must have at least one visible character).
TENANT_KEY = ""


@dataclass(frozen=True, slots=True)
class FlowControl:
    """A schedule's ``flow_control`` object as given (``key`` None: the target's origin)."""

    key: str | None = None
    max_concurrency: int | None = None
    rate_per_second: float | None = None
    burst: int | None = None


def effective_key(flow: FlowControl, url: str) -> str:
    """The key the schedule's runs count under: the given one, else the target's origin."""
    return flow.key if flow.key is not None else target_key(url)


def default_burst(rate_per_second: float) -> int:
    """One second's worth of tokens (at least one) when the tenant gives no ``burst``."""
    return max(1, math.ceil(rate_per_second))


def check_flow_control(flow: FlowControl, stored_key: str | None = None) -> None:
    """Refuse a limit out of range or a key that is no label, naming the field
    (``flow_control.max_concurrency``). ``stored_key``: the key the schedule has now; kept
    as it is, it is not checked again (an older release may have accepted it)."""
    if flow.key is not None and flow.key != stored_key:
        check_label(f"{FIELD}.key", flow.key, MAX_KEY_CHARS)
    if flow.max_concurrency is not None and not 1 <= flow.max_concurrency <= MAX_CONCURRENCY:
        raise RuleViolation(f"{FIELD}.max_concurrency",
                            f"must be between 1 and {MAX_CONCURRENCY:,}")
    if flow.rate_per_second is not None and not (
            math.isfinite(flow.rate_per_second)
            and MIN_RATE_PER_SECOND <= flow.rate_per_second <= MAX_RATE_PER_SECOND):
        raise RuleViolation(f"{FIELD}.rate_per_second",
                            f"must be between {MIN_RATE_PER_SECOND:.5f} and "
                            f"{MAX_RATE_PER_SECOND:,.0f}")
    if flow.burst is not None:
        if flow.rate_per_second is None:
            raise RuleViolation(f"{FIELD}.burst", "needs rate_per_second (it sizes the "
                                "rate's token bucket)")
        if not 1 <= flow.burst <= MAX_BURST:
            raise RuleViolation(f"{FIELD}.burst", f"must be between 1 and {MAX_BURST:,}")


def flow_to_document(flow: FlowControl | None) -> dict[str, Any] | None:
    if flow is None:
        return None
    return {"key": flow.key, "max_concurrency": flow.max_concurrency,
            "rate_per_second": flow.rate_per_second, "burst": flow.burst}


def flow_from_document(doc: dict[str, Any] | None) -> FlowControl | None:
    if doc is None:
        return None
    rate = doc.get("rate_per_second")
    return FlowControl(key=doc.get("key"), max_concurrency=doc.get("max_concurrency"),
                       rate_per_second=None if rate is None else float(rate),
                       burst=doc.get("burst"))


@dataclass(frozen=True, slots=True)
class FlowKeyState:
    """One key as ``GET /v1/flow-control`` shows it."""

    key: str
    max_concurrency: int | None
    rate_per_second: float | None
    in_flight: int
    waiting: int
    held_until: datetime | None
