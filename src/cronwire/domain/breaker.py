"""Circuit breaker per (tenant, target origin): pure state and transitions.

The state lives in Postgres (``target_breaker``) so every replica agrees; this module
only decides. Three states:

- ``closed``: deliveries go out; ``failures`` counts consecutive failed attempts and the
  breaker opens when it reaches ``policy.failure_threshold``.
- ``open`` until ``opened_until``: runs claimed for the target are deferred to that
  instant without consuming an attempt.
- ``half_open``: the cool-down is over and exactly one replica holds the probe (a
  conditional update decides who); its outcome closes or re-opens the breaker, and every
  other run for the target waits for it.

Only answers that say something about the target's health count. A 2xx or any 4xx other
than 408/425/429 means the target is up (a wrong request is the tenant's problem, not a
sick receiver); 5xx, 408/425/429, timeouts and connection errors count as failures; a
request refused by our own address policy never reached the target and does not count.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from urllib.parse import urlsplit
from uuid import UUID

from cronwire.domain.delivery import DeliveryResult, Outcome
from cronwire.domain.netpolicy import DEFAULT_PORTS


class BreakerStatus(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    failure_threshold: int = 5
    cooldown_seconds: float = 30.0
    # How long runs wait for a half-open probe before looking again.
    probe_wait_seconds: float = 5.0


@dataclass(frozen=True, slots=True)
class BreakerState:
    status: BreakerStatus = BreakerStatus.CLOSED
    failures: int = 0
    opened_until: datetime | None = None
    probe_by: str | None = None
    probe_expires_at: datetime | None = None


CLOSED = BreakerState()


class Admission(Enum):
    DELIVER = "deliver"  # closed: go ahead
    TRY_PROBE = "try_probe"  # cool-down over: whoever wins the probe delivers one run
    DEFER = "defer"  # open, or another replica's probe is still out


@functools.lru_cache(maxsize=4096)  # one parse per distinct URL, not one per run
def target_key(url: str) -> str:
    """The breaker's unit: ``scheme://host:port``, lower-cased, default ports written
    out (``https://Example.com/x`` and ``https://example.com:443/y`` share a breaker)."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    except ValueError:  # a malformed port: still a stable key, never an exception
        return url.strip().lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def admission(state: BreakerState, now: datetime) -> tuple[Admission, datetime | None]:
    """What to do with a run claimed for a target in ``state``; the instant is when a
    deferred run should be looked at again (None when it is delivered now)."""
    if state.status is BreakerStatus.CLOSED:
        return Admission.DELIVER, None
    if state.status is BreakerStatus.OPEN:
        if state.opened_until is not None and state.opened_until > now:
            return Admission.DEFER, state.opened_until
        return Admission.TRY_PROBE, None
    if state.probe_expires_at is not None and state.probe_expires_at > now:
        return Admission.DEFER, state.probe_expires_at
    return Admission.TRY_PROBE, None  # the probe holder vanished: take it over


def health_signal(result: DeliveryResult) -> bool | None:
    """True: the target answered sanely; False: it looks sick; None: says nothing."""
    if result.outcome is Outcome.SUCCESS:
        return True
    if result.outcome is Outcome.BLOCKED:
        return None
    return not result.retryable


BreakerKey = tuple[UUID, str]  # (tenant_id, target_key)


def outcomes_by_target(
    outcomes: Iterable[tuple[UUID, str, bool]],
) -> dict[BreakerKey, list[bool]]:
    """A batch's (tenant, target, healthy) outcomes grouped per breaker, in arrival order:
    what every BreakerStore applies with :func:`after_outcomes`."""
    by_key: dict[BreakerKey, list[bool]] = {}
    for tenant_id, key, healthy in outcomes:
        by_key.setdefault((tenant_id, key), []).append(healthy)
    return by_key


def after_outcomes(
    state: BreakerState, healthy: Iterable[bool], now: datetime, policy: BreakerPolicy
) -> BreakerState:
    """Fold attempt outcomes (in the order they finished) into the breaker state."""
    for ok in healthy:
        state = _after_one(state, ok, now, policy)
    return state


def _after_one(state: BreakerState, ok: bool, now: datetime, policy: BreakerPolicy) -> BreakerState:
    if ok:
        return CLOSED  # any sane answer proves the target is back
    failures = state.failures + 1
    reopen = state.status is BreakerStatus.HALF_OPEN or (
        state.status is BreakerStatus.CLOSED and failures >= policy.failure_threshold
    )
    if reopen:
        return BreakerState(
            status=BreakerStatus.OPEN,
            failures=failures,
            opened_until=now + timedelta(seconds=policy.cooldown_seconds),
        )
    # Still closed below the threshold, or already open: an in-flight straggler failing
    # while open does not extend the cool-down.
    return replace(state, failures=failures)
