"""A tenant's volume of runs not yet ended (ADR 0055): the rule that refuses a request
that would add runs past the tenant's limit.

Runs not yet ended are ``pending``, ``running`` and ``retrying``. Backfill, replay and a
manual trigger add runs on a tenant's say-so, so they are refused past the limit (429,
``limit: "max_pending_runs"``); the planner's occurrences never are (they are the
schedules the tenant was allowed to create). The store counts the tenant's runs up to the
limit and no further (a count past it would change no decision), so ``counted`` is
``min(actual, limit)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from cronwire.domain.errors import LimitExceeded

DEFAULT_MAX_PENDING_RUNS = 100_000
LIMIT = "max_pending_runs"
SETTING = "SCHEDULER_TENANT_MAX_PENDING_RUNS"
OPEN_STATUSES = ("pending", "running", "retrying")


@dataclass(frozen=True, slots=True)
class OpenRuns:
    """A tenant's runs not yet ended, counted up to ``limit``, and whose limit it is."""

    counted: int
    limit: int
    own: bool  # the tenant's own limit (tenant.max_pending_runs), not the setting's

    @property
    def room(self) -> int:
        return max(0, self.limit - self.counted)

    def admits(self, adding: int) -> bool:
        return adding <= self.room

    def check(self, adding: int) -> None:
        """Raise :class:`LimitExceeded` naming the limit and its value unless ``adding``
        more runs fit."""
        if self.admits(adding):
            return
        whose = ("this tenant's own limit, set by an operator with `cronwire tenant limit`"
                 if self.own else SETTING)
        at_least = "at least " if self.counted >= self.limit else ""
        raise LimitExceeded(
            LIMIT, None,
            f"this tenant has {at_least}{self.counted} runs not yet ended (pending, running "
            f"or retrying) and this request would add {adding}; the limit is {self.limit} "
            f"({whose}). Retry when runs have ended.")
