"""Replay of dead letters: a failed run delivered again as a new run. Pure data and rules.

A replay is a run of its own (``trigger: "replay"``, ``replay_of``: the failed run), with a
new id and so a new ``webhook-id``: the receiver is meant to process it again. Its row
takes a manual run's kind of instant (the database clock, never a whole second), so it
cannot occupy an occurrence's ``(schedule_id, scheduled_for)`` slot, and it is not a
scheduled run of anything (max_runs, the misfire policy and the overlap gate ignore it).
What it delivers is the original occurrence: ``x-cronwire-scheduled-for`` and the default
body carry the failed run's ``scheduled_for``.

A failed run is replayed once: the original row records its replay (``replayed_by``) in
the same statement that writes it, under the row's lock, so concurrent requests cannot
replay one dead letter twice. A replay that fails is itself a dead letter and can be
replayed in turn.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from cronwire.domain.errors import RuleViolation

MAX_REPLAY = 1000
DEFAULT_REPLAY = 100
REPLAYABLE_STATUS = "failed"


@dataclass(frozen=True, slots=True)
class ReplayQuery:
    """Which dead letters a bulk replay takes: failed, not yet replayed, oldest first."""

    limit: int = DEFAULT_REPLAY
    schedule_id: uuid.UUID | None = None
    since: datetime | None = None  # inclusive bound on scheduled_for
    until: datetime | None = None  # exclusive

    def checked(self) -> ReplayQuery:
        if not 1 <= self.limit <= MAX_REPLAY:
            raise RuleViolation("limit", f"must be between 1 and {MAX_REPLAY:,}")
        if self.since is not None and self.until is not None and not self.since < self.until:
            raise RuleViolation("until", "must be later than since")
        return self


