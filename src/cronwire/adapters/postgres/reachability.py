"""Whether a Postgres server answers, and if not why, in a few words: what `cronwire serve`
says while it waits for its database at start-up."""

from __future__ import annotations

import socket
from dataclasses import dataclass

import asyncpg

from cronwire.adapters.postgres.connect import connect_primary
from cronwire.adapters.postgres.sql import queries

# Refusals that waiting does not cure: the server answered and said no.
_LASTING = (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError,
            asyncpg.InvalidCatalogNameError)


@dataclass(frozen=True, slots=True)
class Unreachable:
    reason: str
    lasting: bool  # the server refused (credentials, no such database): waiting will not help


async def probe(dsn: str, seconds: float) -> Unreachable | None:
    """None when a session on a writable server opens and answers a query within
    ``seconds`` (per host: the connector the pools use, so a failover pair's URL and its
    parameters mean what they mean to them); else why not. Never raises for a connection
    problem: every one becomes an :class:`Unreachable`."""
    try:
        conn = await connect_primary(dsn, timeout=seconds)
    except _LASTING as exc:
        return Unreachable(str(exc), lasting=True)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        return Unreachable(_reason(exc, seconds), lasting=False)
    try:
        await conn.fetchval(queries()["database_ping"], timeout=seconds)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        return Unreachable(_reason(exc, seconds), lasting=False)
    finally:
        try:
            await conn.close(timeout=seconds)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError):
            conn.terminate()  # a close that does not finish still frees the socket
    return None


def _reason(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "the host name does not resolve"
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, asyncpg.CannotConnectNowError):
        return "the server is starting up or shutting down"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
