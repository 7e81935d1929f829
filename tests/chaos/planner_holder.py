"""A planner that dies mid-transaction: it claims, decides and inserts, reports what it
did as one JSON line, then blocks before COMMIT until it is killed.

    python -m tests.chaos.planner_holder DSN LIMIT
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from collections.abc import Sequence
from datetime import datetime

from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.adapters.postgres.pool import create_pool
from cronwire.domain.model import DueSchedule, PlanDecision
from cronwire.domain.planning import Span, decide

LOOKAHEAD_SECONDS = 5.0
HOLD_SECONDS = 120.0


async def hold(dsn: str, limit: int) -> None:
    pool = await create_pool(dsn, 1)
    claimed: list[str] = []

    def recording(schedules: Sequence[DueSchedule], now: datetime,
                  writable: Span | None) -> PlanDecision:
        claimed.extend(str(s.id) for s in schedules)
        return functools.partial(decide, lookahead_seconds=LOOKAHEAD_SECONDS)(
            schedules, now, writable)

    async with pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        _, inserted = await PostgresPlannerStore(pool).plan_on(
            conn, limit=limit, lookahead_seconds=LOOKAHEAD_SECONDS, decide=recording
        )
        print(json.dumps({"claimed": claimed, "inserted": inserted}), flush=True)
        # Block before COMMIT until killed. Bounded all the same: after HOLD_SECONDS give
        # up without committing (exit status 3 tells the test the kill never came).
        await asyncio.sleep(HOLD_SECONDS)
        sys.exit(3)


if __name__ == "__main__":
    asyncio.run(hold(sys.argv[1], int(sys.argv[2])))
