"""What `cronwire serve` checks before it starts anything, so a mistake is one early line:
the listen address is free (bound here and handed to the HTTP server, so nobody takes it
in between), and a configured database answers (said while it waits, then one line naming
SCHEDULER_DATABASE_URL)."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from collections.abc import Callable

from cronwire.adapters.postgres.reachability import probe
from cronwire.config import Settings, shown_dsn
from cronwire.domain.errors import ConfigError

log = logging.getLogger("cronwire")

# How long serve waits for a configured database that does not answer yet (a database
# started beside it, a failover) before it gives up with one line.
DATABASE_WAIT_SECONDS = 15.0
_CONNECT_TIMEOUT_SECONDS = 5.0
_RETRY_EVERY_SECONDS = 1.0


def bind_listener(settings: Settings) -> socket.socket:
    """A socket bound to SCHEDULER_HTTP_HOST:SCHEDULER_HTTP_PORT (the HTTP server listens
    on it later). A taken port or a host that is not ours is a ConfigError naming it."""
    host, port = settings.http_host, settings.http_port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"SCHEDULER_HTTP_PORT: {host}:{port} is already in use (another `cronwire "
                "serve`?); stop that process or set SCHEDULER_HTTP_PORT to a free port"
            ) from None
        raise ConfigError(
            f"SCHEDULER_HTTP_HOST: cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    return sock


async def wait_for_database(
    dsn: str, within: float = DATABASE_WAIT_SECONDS,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Return once the database at ``dsn`` answers. While it does not, log what is tried
    (at most every few seconds); after ``within`` seconds, or at once when the server
    refuses us (credentials, no such database), raise a ConfigError naming
    SCHEDULER_DATABASE_URL."""
    shown = shown_dsn(dsn)
    deadline = monotonic() + within
    said_at: float | None = None
    while True:
        failure = await probe(dsn, min(_CONNECT_TIMEOUT_SECONDS, within))
        if failure is None:
            if said_at is not None:
                log.info("the database at %s answers", shown)
            return
        if failure.lasting:
            raise ConfigError(f"SCHEDULER_DATABASE_URL: {shown}: {failure.reason}")
        left = deadline - monotonic()
        if left <= 0:
            raise ConfigError(
                f"SCHEDULER_DATABASE_URL: no database answers at {shown} ({failure.reason}; "
                f"tried for {within:g} s)"
            )
        if said_at is None or monotonic() - said_at >= 5:
            log.warning("waiting for the database at %s (SCHEDULER_DATABASE_URL): %s; "
                        "trying again for up to %.0f s", shown, failure.reason, left,
                        extra={"action": "startup.database_wait"})
            said_at = monotonic()
        await asyncio.sleep(min(_RETRY_EVERY_SECONDS, left))
