"""In-memory adapters for tests: one process, no database, the Postgres adapters' rules.

Build a :class:`MemoryDatabase` and hand its stores to the services::

    db = MemoryDatabase()
    executor = build_executor(settings, claims=MemoryClaimSource(db), runs=MemoryRunStore(db),
                              breakers=MemoryBreakerStore(db), ...)

Each store passes the same contract suite as its Postgres adapter (tests/contract): the
lease rules (owner and lease generation on every write, expiry by the database's clock,
only started attempts count towards exhaustion, cancel_requested after a delete),
``UNIQUE (schedule_id, scheduled_for)`` and due-by-clock. The database's clock is
:class:`MemoryClock`: it follows real time unless frozen, and tests move it with
:meth:`MemoryClock.advance` instead of sleeping. Operations never await inside, so each
is atomic on one event loop, as a transaction is.
"""

from cronwire.adapters.memory.breaker_store import MemoryBreakerStore
from cronwire.adapters.memory.calendar_store import MemoryCalendarStore
from cronwire.adapters.memory.claim_source import MemoryClaimSource
from cronwire.adapters.memory.database import MemoryClock, MemoryDatabase, MemoryRun
from cronwire.adapters.memory.keyed_claims import MemoryHints, MemoryKeyedClaims
from cronwire.adapters.memory.planner_store import MemoryPlannerStore
from cronwire.adapters.memory.run_commands import MemoryRunCommands
from cronwire.adapters.memory.run_store import MemoryRunStore
from cronwire.adapters.memory.schedule_store import MemoryScheduleStore

__all__ = [
    "MemoryBreakerStore",
    "MemoryCalendarStore",
    "MemoryClaimSource",
    "MemoryClock",
    "MemoryDatabase",
    "MemoryHints",
    "MemoryKeyedClaims",
    "MemoryPlannerStore",
    "MemoryRun",
    "MemoryRunCommands",
    "MemoryRunStore",
    "MemoryScheduleStore",
]
