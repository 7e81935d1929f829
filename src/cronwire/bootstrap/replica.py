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
import socket
from collections.abc import Awaitable, Generator
from typing import Any

import uvicorn

from cronwire.api.ops_app import OpsApp, ReadinessCheck
from cronwire.bootstrap.container import build_container, init_resources, shutdown_resources
from cronwire.bootstrap.embedded import embedded_broker, embedded_postgres
from cronwire.bootstrap.factories import check_buildable, database_checks, migrate, uses_kafka
from cronwire.bootstrap.runtime import Runtime, api_routers, build_runtime, role_loops
from cronwire.bootstrap.secret_keys import MISSING, open_sealed_secrets, with_key_ring
from cronwire.bootstrap.startup import bind_listener, wait_for_database
from cronwire.config import Settings
from cronwire.domain.errors import ConfigError
from cronwire.logs import warn_about_settings
from cronwire.service.periodic import every
from cronwire.service.supervisor import LoopCrashed, Supervisor

log = logging.getLogger("cronwire")
# How often scheduler_readiness is re-evaluated between /readyz calls (as the fleet gauges).
READINESS_SAMPLE_SECONDS = 5.0


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


def _readiness(runtime: Runtime, supervisor: Supervisor) -> ReadinessCheck:
    async def check() -> dict[str, bool]:
        checks = {"database": False}
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


def _http_app(runtime: Runtime, readiness: ReadinessCheck) -> Any:
    """The API's FastAPI application with the api role; without it, the bare operations
    application, and FastAPI and pydantic are never imported (docs/operating.md#start-up)."""
    if runtime.api is None:
        return OpsApp(readiness, runtime.metrics.exposition)
    from cronwire.api.app import create_app

    return create_app(readiness, runtime.metrics.exposition, api_routers(runtime))


async def run_replica(settings: Settings, stop: asyncio.Event | None = None,
                      listener: socket.socket | None = None) -> None:
    """Run until ``stop`` is set or SIGTERM/SIGINT arrives; HTTP on ``listener`` if given
    (bound already), else on SCHEDULER_HTTP_HOST:PORT."""
    assert settings.database_url is not None
    warn_about_settings(settings)
    if not settings.secret_keys:  # before migrating: nothing changes without a key
        raise ConfigError(MISSING)
    if settings.auto_migrate:
        applied = await migrate(settings.database_url)
        if applied:
            # Numbers, not a count: they are the files' numbers, gaps included (see
            # migrations/README.md for why some numbers were never used).
            log.info("applied migrations %s (migrations/README.md explains the numbering)",
                     ", ".join(f"{number:04d}" for number in applied))
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)

    container = build_container(settings)
    await init_resources(container)
    try:
        await open_sealed_secrets(container, settings)
    except BaseException:
        await shutdown_resources(container)
        raise
    runtime = await build_runtime(container)
    supervisor = Supervisor()
    tune_gc()
    readiness = _readiness(runtime, supervisor)
    # scheduler_readiness is exported from the first scrape, and kept fresh without anyone
    # calling /readyz (an alert on it must not depend on a probe being configured).
    await readiness()
    server = _Server(uvicorn.Config(
        _http_app(runtime, readiness), host=settings.http_host, port=settings.http_port,
        log_level="warning",
        lifespan="off", access_log=False, log_config=None,  # uvicorn logs via our handler
    ))
    sockets = [listener] if listener is not None else None
    http_task = asyncio.create_task(server.serve(sockets=sockets), name="http")
    sampling = asyncio.create_task(
        every(READINESS_SAMPLE_SECONDS, stop, readiness, "readiness sampling",
              first_delay=READINESS_SAMPLE_SECONDS), name="readiness sampling")
    try:
        for name, body in (await role_loops(container, settings)).items():
            supervisor.start(name, body)
        log.info("replica %s serving http://%s:%s roles=%s claim_source=%s%s",
                 settings.instance_id, settings.http_host, settings.http_port,
                 ",".join(sorted(settings.roles)), settings.claim_source, _where(settings))
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
        sampling.cancel()
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(http_task, timeout=5)
        await shutdown_resources(container)
    log.info("replica %s stopped", settings.instance_id)


def _where(settings: Settings) -> str:
    """Where a person finds the console and the API's docs, for the start-up line."""
    if "api" not in settings.roles:
        return ""
    host = settings.http_host
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    base = f"http://{shown}:{settings.http_port}"
    return f"; console {base}/console, API docs {base}/docs"


def serve(settings: Settings) -> None:
    """Check what can be checked first (the broker in kafka mode, the listen address), then
    start the embedded servers, wait for the database, and run the replica. Whatever was
    started is stopped on the way out, a Ctrl-C during start-up included."""
    check_buildable(settings)
    settings = with_key_ring(settings)  # none with a database of its own: exit 2, now
    listener = bind_listener(settings)  # a taken port: one line, exit 2, nothing started
    embedded = settings.embedded_database
    try:
        with listener, embedded_postgres(settings) as settings, \
                embedded_broker(settings) as settings:
            _run(_start(settings, listener, waits_for_database=not embedded))
    except LoopCrashed as crash:
        log.error("replica %s stopped: %s", settings.instance_id, crash)
        raise SystemExit(1) from crash


async def _start(settings: Settings, listener: socket.socket, *, waits_for_database: bool) -> None:
    if waits_for_database:
        assert settings.database_url is not None
        await wait_for_database(settings.database_url)
    await run_replica(settings, listener=listener)


def _run(main: Awaitable[None]) -> None:
    try:
        import uvloop

        uvloop.run(main)  # type: ignore[arg-type]
    except ImportError:  # pragma: no cover - uvloop is a dependency, but optional on odd platforms
        asyncio.run(main)  # type: ignore[arg-type]
