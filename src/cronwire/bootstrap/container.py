"""The composition root: the only module that wires concrete adapters to services.

Nothing here runs at import time; providers build objects when first asked. Tests
swap adapters with ``container.<provider>.override(...)``.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import asyncpg

from cronwire.bootstrap.quiet_import import hiding

# dependency-injector imports, when it is first imported, every integration it supports
# that is installed: FastAPI (and with it pydantic's models), pydantic-settings, werkzeug,
# yaml. We use none of them (no @inject wiring, no configuration from pydantic or yaml), and
# on a replica without the api role they were about 40 % of its start-up CPU
# (docs/operating.md#start-up). So the library is loaded without seeing them; they import
# as usual afterwards, for the API or anyone else.
with hiding("fastapi", "starlette", "pydantic", "pydantic_settings", "werkzeug", "yaml",
            "fast_depends"):
    from dependency_injector import containers, providers

from cronwire.adapters.crypto.envelope import EnvelopeSecretBox
from cronwire.adapters.crypto.key_ring import KeyRing
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.otel.setup import build_tracer
from cronwire.adapters.postgres.alert_outbox import PostgresAlertOutbox
from cronwire.adapters.postgres.alert_store import PostgresAlertStore
from cronwire.adapters.postgres.audit_log import PostgresAuditLog
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore
from cronwire.adapters.postgres.calendar_store import PostgresCalendarStore
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.data_key_store import PostgresDataKeyStore
from cronwire.adapters.postgres.flow_store import PostgresFlowControl
from cronwire.adapters.postgres.keyed_claims import PostgresKeyedClaims
from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.adapters.postgres.outbox_store import PostgresOutboxStore
from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.run_commands import PostgresRunCommands
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.adapters.postgres.sealing_pass import PostgresSealingPass
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.adapters.postgres.token_store import PostgresTokenStore
from cronwire.adapters.skewed_clock import replica_clock
from cronwire.bootstrap import api_resources, reads
from cronwire.bootstrap.executor import build_executor
from cronwire.bootstrap.factories import uses_kafka
from cronwire.config import Settings
from cronwire.ports import Tracer
from cronwire.service.alert_dispatcher import AlertDispatcher
from cronwire.service.executor import ExecutorSettings
from cronwire.service.executor.hybrid_claims import HybridClaimSource
from cronwire.service.maintenance import FleetGauges, PartitionKeeper
from cronwire.service.outbox_relay import OutboxRelay
from cronwire.service.planner import Planner
from cronwire.version import version

# The optional adapters' libraries (aiokafka, httpx) are imported when a replica's mode or
# settings first ask for them, not by every replica at start-up (docs/operating.md).
if TYPE_CHECKING:
    from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer
    from cronwire.adapters.kafka.hints import KafkaRunHints
    from cronwire.adapters.kafka.link import KafkaLink
    from cronwire.adapters.kafka.publisher import KafkaRunPublisher

T = TypeVar("T")


async def _pool_resource(dsn: str, size: int,
                         tenant_max_concurrency: int | None = None) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(dsn, size, tenant_max_concurrency=tenant_max_concurrency)
    try:
        yield pool
    finally:
        await pool.close()


async def _deliverer_resource(
    deliverer: HttpxDeliverer | LeanDeliverer,
) -> AsyncIterator[HttpxDeliverer | LeanDeliverer]:
    await deliverer.start()
    try:
        yield deliverer
    finally:
        await deliverer.close()


def _httpx_deliverer(**kwargs: Any) -> HttpxDeliverer:
    from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer

    return HttpxDeliverer(**kwargs)


async def _tracer_resource(settings: Settings) -> AsyncIterator[Tracer]:
    """OpenTelemetry when the standard OTEL_* variables ask for it (ADR 0035), else the
    port's NoTracer; buffered spans are exported at shutdown."""
    tracer = build_tracer(os.environ, settings.instance_id, version())
    try:
        yield tracer
    finally:
        tracer.shutdown()


async def _kafka_link_resource(
    settings: Settings, metrics: PrometheusMetrics
) -> AsyncIterator[KafkaLink | None]:
    """The broker link (topic creation, probing); None in postgres mode."""
    if not uses_kafka(settings):
        yield None
        return
    assert settings.kafka_bootstrap_servers is not None, "serve resolves the embedded broker"
    from cronwire.adapters.kafka.link import KafkaLink

    link = KafkaLink(
        settings.kafka_bootstrap_servers, settings.kafka_topic, settings.kafka_partitions,
        replication_factor=settings.kafka_replication_factor, on_change=metrics.set_broker_up,
    )
    await link.start()
    try:
        yield link
    finally:
        await link.close()


async def _kafka_hints_resource(
    settings: Settings, link: KafkaLink | None, metrics: PrometheusMetrics
) -> AsyncIterator[KafkaRunHints | None]:
    """The executors' consumer group member; only where the executor role runs."""
    if link is None or "executor" not in settings.roles:
        yield None
        return
    from cronwire.adapters.kafka.hints import KafkaRunHints

    hints = KafkaRunHints(
        # Per partition: a burst's partition refills in large steps (each refill costs a
        # fetch round trip after its resume), while other partitions keep their turn.
        link, settings.kafka_consumer_group, buffer_limit=4 * settings.executor_batch,
        client_id=f"cronwire-{settings.instance_id}",
        on_skipped=metrics.kafka_message_skipped,
    )
    await hints.start()
    try:
        yield hints
    finally:
        await hints.close()


async def _kafka_publisher_resource(link: KafkaLink | None) -> AsyncIterator[KafkaRunPublisher | None]:
    if link is None:
        yield None
        return
    from cronwire.adapters.kafka.publisher import KafkaRunPublisher

    publisher = KafkaRunPublisher(link)
    try:
        yield publisher
    finally:
        await publisher.close()


class Container(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=Settings)

    # The system clock unless a chaos run skews it (CRONWIRE_CHAOS_CLOCK_SKEW_SECONDS).
    clock = providers.Singleton(replica_clock)
    metrics = providers.Singleton(PrometheusMetrics)
    tracer = providers.Resource(_tracer_resource, settings=settings)

    db_pool = providers.Resource(
        _pool_resource,
        dsn=settings.provided.database_url,
        size=settings.provided.db_pool_size,
        tenant_max_concurrency=settings.provided.tenant_max_concurrency,
    )
    # -- sealed secrets (ADR 0061): one box per replica, its data keys kept in memory --
    key_ring = providers.Singleton(KeyRing, entries=settings.provided.secret_keys)
    data_key_store = providers.Singleton(PostgresDataKeyStore, pool=db_pool)
    secret_box = providers.Singleton(EnvelopeSecretBox, wrapper=key_ring, store=data_key_store)
    sealing_pass = providers.Singleton(PostgresSealingPass, pool=db_pool, box=secret_box)

    target_guard = providers.Singleton(
        TargetGuard, allow_private=settings.provided.allow_private_targets
    )
    deliverer = providers.Resource(
        _deliverer_resource,
        deliverer=providers.Selector(
            settings.provided.deliverer,
            httpx=providers.Factory(
                _httpx_deliverer, guard=target_guard,
                max_connections=settings.provided.executor_workers,
                monotonic=clock.provided.monotonic,
            ),
            lean=providers.Factory(
                LeanDeliverer, guard=target_guard,
                max_connections=settings.provided.executor_workers,
                monotonic=clock.provided.monotonic,
                on_late_send=metrics.provided.sent_after_deadline,
            ),
        ),
    )

    maintenance_store = providers.Singleton(PostgresMaintenanceStore, pool=db_pool)
    partition_keeper = providers.Singleton(
        PartitionKeeper, store=maintenance_store,
        retention_months=settings.provided.retention_months, interval_seconds=3600.0,
        audit_retention_days=settings.provided.audit_retention_days,
    )
    fleet_gauges = providers.Singleton(
        FleetGauges, store=maintenance_store, metrics=metrics, clock=clock, interval_seconds=5.0,
    )

    # -- planner providers (stage 1) --
    planner_store = providers.Singleton(PostgresPlannerStore, pool=db_pool)
    planner = providers.Singleton(
        Planner,
        store=planner_store,
        metrics=metrics,
        batch=settings.provided.planner_batch,
        tick_seconds=settings.provided.planner_tick_seconds,
        lookahead_seconds=settings.provided.planner_lookahead_seconds,
        tracer=tracer,
    )

    # -- kafka mode providers: clients owned by Resources, None in postgres mode --
    kafka_link = providers.Resource(_kafka_link_resource, settings=settings, metrics=metrics)
    kafka_hints = providers.Resource(_kafka_hints_resource, settings=settings, link=kafka_link,
                                     metrics=metrics)
    kafka_publisher = providers.Resource(_kafka_publisher_resource, link=kafka_link)
    outbox_relay = providers.Singleton(
        OutboxRelay, store=providers.Singleton(PostgresOutboxStore, pool=db_pool),
        publisher=kafka_publisher, hints=kafka_hints,
        sweep_grace_seconds=settings.provided.kafka_sweep_grace_seconds,
    )
    polling_claim_source = providers.Singleton(PostgresClaimSource, pool=db_pool, box=secret_box)

    # -- executor providers (stage 2) --
    claim_source = providers.Selector(
        settings.provided.claim_source,
        postgres=polling_claim_source,
        kafka=providers.Singleton(
            HybridClaimSource, hints=kafka_hints,
            keyed=providers.Singleton(PostgresKeyedClaims, pool=db_pool, box=secret_box),
            polling=polling_claim_source, clock=clock,
            grace_seconds=settings.provided.kafka_sweep_grace_seconds,
        ),
    )
    run_store = providers.Singleton(PostgresRunStore, pool=db_pool)
    breaker_store = providers.Singleton(PostgresBreakerStore, pool=db_pool)
    executor_settings = providers.Singleton(
        ExecutorSettings,
        owner=settings.provided.instance_id,
        workers=settings.provided.executor_workers,
        batch=settings.provided.executor_batch,
        lease_seconds=settings.provided.lease_seconds,
        delivery_timeout=settings.provided.delivery_timeout_seconds,
        grace_seconds=settings.provided.shutdown_grace_seconds,
    )
    executor = providers.Singleton(
        build_executor, executor_settings, claims=claim_source, runs=run_store,
        breakers=breaker_store, deliverer=deliverer, metrics=metrics, clock=clock,
        tracer=tracer,
    )

    # -- api providers: a pool and a CPU lane of their own (ADR 0055); resolved only where
    # the api role runs (api_pool is None elsewhere) --
    api_pool = providers.Resource(api_resources.api_pool_resource, settings=settings)
    cpu_lane = providers.Resource(api_resources.cpu_lane_resource)
    tenant_store = providers.Singleton(PostgresTenantStore, pool=api_pool)
    token_store = providers.Singleton(PostgresTokenStore, pool=api_pool)
    audit_log = providers.Singleton(PostgresAuditLog, pool=api_pool)
    calendar_store = providers.Singleton(PostgresCalendarStore, pool=api_pool)
    schedule_store = providers.Singleton(PostgresScheduleStore, pool=api_pool,
                                        box=secret_box)
    read_pool = providers.Resource(reads.read_pool_resource, settings=settings)
    standby_freshness = providers.Singleton(
        reads.freshness, primary_pool=api_pool, read_pool=read_pool,
        max_lag_seconds=settings.provided.read_max_lag_seconds,
    )
    run_history = providers.Singleton(
        reads.run_history, primary_pool=api_pool, read_pool=read_pool,
        freshness=standby_freshness, metrics=metrics,
    )
    flow_control = providers.Singleton(PostgresFlowControl, pool=api_pool)
    stats_reader = providers.Singleton(
        reads.stats_reader, primary_pool=api_pool, read_pool=read_pool,
        freshness=standby_freshness, metrics=metrics, cpu=cpu_lane,
    )

    # -- alerts (every replica: late is noticed even when no executor is healthy) --
    alert_store = providers.Singleton(PostgresAlertStore, pool=api_pool, box=secret_box)
    alert_dispatcher = providers.Singleton(
        AlertDispatcher,
        outbox=providers.Singleton(PostgresAlertOutbox, pool=db_pool, box=secret_box),
        deliverer=deliverer, metrics=metrics,
        owner=settings.provided.instance_id,
        interval_seconds=settings.provided.alert_check_seconds,
        delivery_timeout=settings.provided.delivery_timeout_seconds,
        retry_initial_seconds=settings.provided.alert_retry_initial_seconds,
    )
    run_commands = providers.Singleton(PostgresRunCommands, pool=api_pool, cpu=cpu_lane)


def build_container(settings: Settings) -> Container:
    return Container(settings=settings)


async def _settled(result: Awaitable[None] | None) -> None:
    """dependency-injector returns an awaitable only when some resource is async."""
    if result is not None:
        await result


async def init_resources(container: Container) -> None:
    """Open the pool, the deliverer and (kafka mode) the broker clients."""
    await _settled(container.init_resources())


async def shutdown_resources(container: Container) -> None:
    await _settled(container.shutdown_resources())


async def resolved(provider: providers.Provider[T]) -> T:
    """A provider's value. Providers that hang off the async pool Resource answer an
    awaitable once resources are initialised; this is the one place that knows it."""
    value: object = provider()
    if inspect.isawaitable(value):
        value = await value
    return cast(T, value)
