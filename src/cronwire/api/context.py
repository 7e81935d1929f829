"""What the tenant routers need, handed over by the container (or a test) in one object:
the ports themselves, ready to call, and the limits as plain numbers."""

from __future__ import annotations

from dataclasses import dataclass, field

from cronwire.domain.rate_limit import TenantRateLimit
from cronwire.domain.schedules import TenantLimits
from cronwire.ports import (
    AlertStore,
    AuditReader,
    CalendarStore,
    CpuWork,
    FlowControlView,
    Metrics,
    OnTheLoop,
    RunCommands,
    RunHistory,
    ScheduleStore,
    StatsReader,
    TokenStore,
)
from cronwire.service.schedule_commands import UrlCheck


@dataclass(frozen=True, slots=True)
class ApiContext:
    tokens: TokenStore  # what a bearer token grants; /v1/tokens
    schedules: ScheduleStore
    runs: RunHistory
    commands: RunCommands  # backfill and replay
    check_url: UrlCheck
    default_limits: TenantLimits
    max_request_bytes: int = 262_144  # SCHEDULER_API_MAX_REQUEST_BYTES
    max_apply_bytes: int = 33_554_432  # SCHEDULER_API_MAX_APPLY_BYTES
    secret_overlap_seconds: int = 24 * 3600
    # The observability readers and stores (stats, explain, alerts); their routes are served only when given.
    stats: StatsReader | None = None
    alerts: AlertStore | None = None
    flows: FlowControlView | None = None  # GET /v1/flow-control (ADR 0040)
    metrics: Metrics | None = None  # the stats queries' latency (scheduler_stats_query_seconds)
    # Where previews and explain walk (ADR 0055); a replica passes its CPU lane.
    cpu: CpuWork = field(default_factory=OnTheLoop)
    # SCHEDULER_API_RATE_PER_SECOND, per tenant, in this replica's memory; None: no limit
    rate_limit: TenantRateLimit | None = None
    audit: AuditReader | None = None  # GET /v1/audit (ADR 0056)
    calendars: CalendarStore | None = None  # /v1/calendars (ADR 0064)
