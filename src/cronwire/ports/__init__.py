"""Every seam the services depend on, as small ``typing.Protocol`` classes.

Services import these and the domain, never an adapter. Each method says what it
means and how it fails. Adapter errors are translated to :mod:`cronwire.domain.errors` at the
adapter boundary; a Protocol method never leaks a driver exception type.

Lease rule 3 (seed ADR): every RunStore write on a leased run takes the ``owner`` and
applies only where ``claimed_by = owner`` still holds; the return value tells the
caller which writes landed so it can count lost leases instead of guessing.

The core ports live in :mod:`cronwire.ports.core`, kafka mode's in
:mod:`cronwire.ports.kafka`, the tenant API's in :mod:`cronwire.ports.tenant` and
observability's (tracing, stats, alerts) in :mod:`cronwire.ports.observability`, metrics
and maintenance in :mod:`cronwire.ports.operations`; every one
is re-exported here, so services import any port from ``cronwire.ports``.
"""

from cronwire.ports.calendars import CalendarStore
from cronwire.ports.core import (
    BreakerStore,
    ClaimSource,
    Clock,
    Deliverer,
    PlannerStore,
    RunStore,
    StartsDeliveries,
)
from cronwire.ports.cpu import CpuWork, OnTheLoop
from cronwire.ports.kafka import KeyedClaimStore, OutboxStore, RunHints, RunKey, RunPublisher
from cronwire.ports.observability import AlertOutbox, AlertStore, StatsReader, Tracer
from cronwire.ports.operations import MaintenanceStore, Metrics
from cronwire.ports.secrets import DataKeyStore, KeyWrapper, SecretBox
from cronwire.ports.tenant import (
    AuditReader,
    BackfillPlanner,
    FlowControlView,
    RunCommands,
    RunHistory,
    ScheduleStore,
    TokenStore,
    TokenVerifier,
)

__all__ = [
    "AlertOutbox",
    "AlertStore",
    "AuditReader",
    "BackfillPlanner",
    "BreakerStore",
    "CalendarStore",
    "ClaimSource",
    "Clock",
    "CpuWork",
    "DataKeyStore",
    "Deliverer",
    "FlowControlView",
    "KeyWrapper",
    "KeyedClaimStore",
    "MaintenanceStore",
    "Metrics",
    "OnTheLoop",
    "OutboxStore",
    "PlannerStore",
    "RunCommands",
    "RunHints",
    "RunHistory",
    "RunKey",
    "RunPublisher",
    "RunStore",
    "ScheduleStore",
    "SecretBox",
    "StartsDeliveries",
    "StatsReader",
    "TokenStore",
    "TokenVerifier",
    "Tracer",
]
