"""`cronwire serve`: one replica's lifecycle — start, run the loops of its roles, drain, exit 0.

Shutdown order on SIGTERM/SIGINT: stop claiming (the shared ``stopping`` event), let
in-flight deliveries finish or be released within the grace period, stop the HTTP
server, close pools and clients, then stop the embedded Postgres if we started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Awaitable, Callable, Generator

import uvicorn

from cronwire.api.app import create_app
from cronwire.bootstrap.container import build_container, init_resources, shutdown_resources
from cronwire.bootstrap.embedded import (
    EmbeddedBroker,
    start_embedded_broker,
    start_embedded_postgres,
)
from cronwire.bootstrap.factories import check_buildable, database_checks, migrate, uses_kafka
from cronwire.bootstrap.runtime import Runtime, api_routers, build_runtime, role_loops
from cronwire.config import Settings
from cronwire.logs import warn_about_settings
from cronwire.service.supervisor import LoopCrashed, Supervisor

log = logging.getLogger("cronwire")


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the replica owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def tune_gc() -> None:
    """Fewer, larger garbage collections for a long-lived async process.

    Each delivery allocates many short-lived objects; with CPython's default generation-0
    threshold (700) the collector ran thousands of times a second and took ~15% of an
    executor's CPU in py-spy (ADR 0006). Objects alive after start-up are frozen out of
    collection altogether."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def _readiness(runtime: Runtime, supervisor: Supervisor) -> Callable[[], Awaitable[dict[str, bool]]]:
    async def check() -> dict[str, bool]:
        checks = {"database": False, "migrations": False}
        try:
            await database_checks(runtime.pool, checks)
        except Exception:  # readiness reports failures, it never raises
            log.warning("readiness: database check failed", exc_info=True)
        checks.update({f"loop:{name}": ok for name, ok in supervisor.health().items()})
        # -- kafka mode: the broker (a lost broker degrades claims to the sweeper) --
        if uses_kafka(runtime.settings):
            link = runtime.kafka_link
            checks["kafka"] = link is not None and link.healthy
            if runtime.kafka_hints is not None:  # the consumer task, between failure and restart
                checks["kafka-consumer"] = runtime.kafka_hints.consuming
        runtime.metrics.set_readiness(checks)
        return checks

    return check


async def run_replica(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set or SIGTERM/SIGINT arrives."""
    assert settings.database_url is not None
    warn_about_settings(settings)
    if settings.auto_migrate:
        applied = await migrate(settings.database_url)
        if applied:
            log.info("applied migrations %s", applied)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)

    container = build_container(settings)
    await init_resources(container)
    runtime = await build_runtime(container)
    supervisor = Supervisor()
    tune_gc()
    app = create_app(
        _readiness(runtime, supervisor),
        runtime.metrics.exposition,
        api_routers(runtime) if "api" in settings.roles else [],
    )
    server = _Server(uvicorn.Config(
        app, host=settings.http_host, port=settings.http_port, log_level="warning",
        lifespan="off", access_log=False, log_config=None,  # uvicorn logs via our handler
    ))
    http_task = asyncio.create_task(server.serve(), name="http")
    try:
        for name, body in (await role_loops(container, settings)).items():
            supervisor.start(name, body)
        log.info("replica %s serving http://%s:%s roles=%s claim_source=%s",
                 settings.instance_id, settings.http_host, settings.http_port,
                 ",".join(sorted(settings.roles)), settings.claim_source)
        stopped = asyncio.create_task(stop.wait())
        # A crashed loop stops the replica too (Supervisor): the orchestrator restarts it.
        crashed = asyncio.create_task(supervisor.crashed.wait())
        await asyncio.wait({stopped, crashed, http_task}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        crashed.cancel()
        if http_task.done() and http_task.exception() is not None:
            raise http_task.exception()  # type: ignore[misc]
        log.info("shutting down: draining within %ss", settings.shutdown_grace_seconds)
        await supervisor.stop(settings.shutdown_grace_seconds)
        if supervisor.crashed.is_set():
            raise LoopCrashed(", ".join(supervisor.crashed_loops))
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(http_task, timeout=5)
        await shutdown_resources(container)
    log.info("replica %s stopped", settings.instance_id)


def serve(settings: Settings) -> None:
    check_buildable(settings)
    settings, embedded = start_embedded_postgres(settings)
    broker: EmbeddedBroker | None = None
    try:
        settings, broker = start_embedded_broker(settings)
        _run(run_replica(settings))
    except LoopCrashed as crash:
        log.error("replica %s stopped: %s", settings.instance_id, crash)
        raise SystemExit(1) from crash
    finally:
        if broker is not None:
            broker.stop()
            log.info("embedded kafka broker stopped")
        if embedded is not None:
            embedded.stop()
            log.info("embedded postgres stopped")


def _run(main: Awaitable[None]) -> None:
    try:
        import uvloop

        uvloop.run(main)  # type: ignore[arg-type]
    except ImportError:  # pragma: no cover - uvloop is a dependency, but optional on odd platforms
        asyncio.run(main)  # type: ignore[arg-type]
