"""The run history a tenant reads: runs, their attempt evidence, and the query shape."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from cronwire.domain.keyset import HistoryPosition
from cronwire.domain.model import AttemptRecord, RunStatus, SkipReason, Trigger

MAX_PAGE = 200


@dataclass(frozen=True, slots=True)
class RunView:
    id: uuid.UUID
    schedule_id: uuid.UUID
    scheduled_for: datetime
    status: RunStatus
    attempt_count: int
    fire_after: datetime
    first_attempt_at: datetime | None
    finished_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    trigger: Trigger
    skip_reason: SkipReason | None = None  # on skipped runs: why
    replay_of: uuid.UUID | None = None  # on a replay: the failed run it repeats
    replayed_by: uuid.UUID | None = None  # on a replayed failed run: its replay

    @property
    def position(self) -> HistoryPosition:
        return HistoryPosition(self.scheduled_for, self.id)


@dataclass(frozen=True, slots=True)
class RunDetail:
    run: RunView
    attempts: tuple[AttemptRecord, ...]  # the executor's evidence rows, oldest first


@dataclass(frozen=True, slots=True)
class RunQuery:
    """One page of history, newest ``scheduled_for`` first.

    ``since`` is inclusive and ``until`` exclusive (``since <= scheduled_for < until``);
    ``before`` is the previous page's last key (keyset pagination).
    """

    limit: int
    schedule_id: uuid.UUID | None = None
    status: RunStatus | None = None
    since: datetime | None = None
    until: datetime | None = None
    before: HistoryPosition | None = None
