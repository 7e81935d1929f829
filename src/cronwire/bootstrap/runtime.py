"""What a replica runs, resolved from its container once the resources are open: the
plain objects its HTTP side needs (:class:`Runtime`) and the loops of its roles. Nothing
past this point knows about providers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncpg

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.alert_store import PostgresAlertStore
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.api.context import ApiContext
from cronwire.bootstrap.container import Container, resolved
from cronwire.bootstrap.factories import uses_kafka
from cronwire.config import Settings
from cronwire.domain.rate_limit import TenantRateLimit
from cronwire.domain.schedules import TenantLimits
from cronwire.service.supervisor import LoopBody

if TYPE_CHECKING:  # aiokafka only in kafka mode, FastAPI only with the api role
    from fastapi import APIRouter

    from cronwire.adapters.kafka.hints import KafkaRunHints
    from cronwire.adapters.kafka.link import KafkaLink


def default_limits(settings: Settings) -> TenantLimits:
    """The limits of a tenant whose own limit columns are NULL."""
    return TenantLimits(
        max_schedules=settings.tenant_max_schedules,
        min_interval_seconds=settings.tenant_min_interval_seconds,
        max_body_bytes=settings.tenant_max_body_bytes,
        max_headers=settings.tenant_max_headers,
        max_pending_runs=settings.tenant_max_pending_runs,
    )


@dataclass(frozen=True, slots=True)
class Runtime:
    """What a replica's HTTP side needs, resolved once after ``init_resources()``: plain
    objects, so nothing past this point knows about providers."""

    settings: Settings
    pool: asyncpg.Pool  # the replica's own (claims, leases, results; /readyz asks it)
    metrics: PrometheusMetrics
    kafka_link: KafkaLink | None
    kafka_hints: KafkaRunHints | None  # the executors' consumer (kafka mode, executor role)
    tenants: PostgresTenantStore | None  # None, like api, without the api role
    api: ApiContext | None  # on the API's own pool and CPU lane (ADR 0055)


async def build_runtime(container: Container) -> Runtime:
    settings: Settings = container.settings()
    tenants: PostgresTenantStore | None = None
    if "api" in settings.roles:
        tenants = await resolved(container.tenant_store)
    return Runtime(
        settings=settings,
        pool=await resolved(container.db_pool),
        metrics=container.metrics(),
        kafka_link=await resolved(container.kafka_link),
        kafka_hints=await resolved(container.kafka_hints),
        tenants=tenants,
        api=None if tenants is None else await _api_context(container, settings),
    )


async def _api_context(container: Container, settings: Settings) -> ApiContext:
    """The API's ports, every one on the API's pool (container.api_pool)."""
    schedules = await resolved(container.schedule_store)
    runs = await resolved(container.run_history)
    commands = await resolved(container.run_commands)
    flows = await resolved(container.flow_control)
    stats = await resolved(container.stats_reader)
    alerts: PostgresAlertStore = await resolved(container.alert_store)
    cpu = await resolved(container.cpu_lane)
    tokens = await resolved(container.token_store)
    audit = await resolved(container.audit_log)
    calendars = await resolved(container.calendar_store)
    return ApiContext(
        tokens=tokens,
        audit=audit,
        calendars=calendars,
        schedules=schedules,
        runs=runs,
        commands=commands,
        check_url=container.target_guard().check_url,
        default_limits=default_limits(settings),
        flows=flows,
        max_request_bytes=settings.api_max_request_bytes,
        max_apply_bytes=settings.api_max_apply_bytes,
        stats=stats,
        alerts=alerts,
        metrics=container.metrics(),
        cpu=cpu,
        rate_limit=TenantRateLimit(settings.api_rate_per_second),
    )


def api_routers(runtime: Runtime) -> list[APIRouter]:
    """Tenant-facing routers served by the ``api`` role (none without it)."""
    if runtime.api is None:
        return []
    from cronwire.api.app import build_tenant_routers

    return build_tenant_routers(runtime.api)


async def role_loops(container: Container, settings: Settings) -> dict[str, LoopBody]:
    """The background loops of this replica's roles, by name (for /readyz)."""
    loops: dict[str, LoopBody] = {}
    # -- planner role (stage 1) --
    if "planner" in settings.roles:
        loops["planner"] = (await resolved(container.planner)).run
    # -- executor role (stage 2) --
    if "executor" in settings.roles:
        loops["executor"] = (await resolved(container.executor)).run
    # -- kafka mode: the outbox publisher (every replica that plans or executes) --
    if uses_kafka(settings):
        loops["publisher"] = (await resolved(container.outbox_relay)).run
    # -- maintenance (every replica) --
    loops["partitions"] = (await resolved(container.partition_keeper)).run
    loops["gauges"] = (await resolved(container.fleet_gauges)).run
    # -- alerts (every replica: late is noticed even when no executor is healthy) --
    loops["alerts"] = (await resolved(container.alert_dispatcher)).run
    return loops
