"""Dialling a receiver for the lean deliverer: only the addresses the guard checked for
the URL's host, in order (ADR 0026's promise); TLS keeps the tenant's host name for SNI."""

from __future__ import annotations

import asyncio
import errno
import ssl

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.http1 import Connection

OUT_OF_FDS = frozenset({errno.EMFILE, errno.ENFILE})


class Dialer:
    def __init__(self, guard: TargetGuard) -> None:
        self._guard = guard

    async def dial(self, scheme: str, host: str, port: int,
                   tls: ssl.SSLContext) -> Connection:
        """A connection to the first checked address that answers; the last error if none
        does. Out of file descriptors is raised at once (the caller may free some).
        ``tls``: the context an https connection uses (plain or with a client
        certificate)."""
        loop = asyncio.get_running_loop()
        context = tls if scheme == "https" else None
        last: OSError | None = None
        for address in await self._guard.resolve_checked(host, port):
            try:
                _transport, connection = await loop.create_connection(
                    Connection, host=address, port=port, ssl=context,
                    server_hostname=host if context is not None else None,
                )
                return connection
            except OSError as exc:
                if exc.errno in OUT_OF_FDS:
                    raise
                last = exc
        raise last or ConnectionError(f"no address to connect to for {host!r}")
