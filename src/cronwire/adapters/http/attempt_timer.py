"""Start and finish times of one delivery attempt, shared by both HTTP adapters."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from cronwire.domain.delivery import DeliveryResult, Outcome


class AttemptTimer:
    """Started on creation; ``result()`` stamps the finish and the duration."""

    __slots__ = ("_began", "started_at")

    def __init__(self) -> None:
        self.started_at = datetime.now(UTC)
        self._began = time.monotonic()

    def result(
        self,
        outcome: Outcome,
        *,
        status: int | None = None,
        error: str | None = None,
        excerpt: str | None = None,
        retry_after: float | None = None,
    ) -> DeliveryResult:
        return DeliveryResult(
            outcome=outcome,
            status_code=status,
            error=error,
            duration_ms=round((time.monotonic() - self._began) * 1000),
            response_excerpt=excerpt,
            retry_after_seconds=retry_after,
            started_at=self.started_at,
            finished_at=datetime.now(UTC),
        )
