"""The lean deliverer's idle connections: keyed by tenant and origin, bounded per key and
in total, closed after an idle timeout (ADR 0026).

* A connection is keyed by ``(tenant, scheme, host, port, TLS context)``: no connection
  is ever shared between tenants, so nothing one tenant's receiver sends can be read as
  another tenant's answer, nor between client certificates (the context presents one).
* Only a connection whose last answer was complete, well framed and asked to keep the
  connection comes back (``Connection.usable``); a byte or a close while it waits here
  removes it at once.
* At most ``per_key`` idle connections per key and ``total`` in all (the oldest goes);
  one that waited ``idle_seconds`` is closed by :meth:`reap`, which the deliverer runs
  every second, and is never handed out.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from cronwire.adapters.http.http1 import Connection

# (tenant, scheme, host, port, the TLS context: plain, or the one of a client certificate)
PoolKey = tuple[UUID, str, str, int, ssl.SSLContext]


@dataclass
class PoolStats:
    """What the pool did, for tests and logs."""

    connects: int = 0
    reuses: int = 0
    # A connection attempt that failed for want of file descriptors, retried after the
    # idle connections were closed: nothing had been sent, so the retry is not a resend.
    fd_retries: int = 0
    # Requests whose send deadline had passed right after their write: the process was
    # stopped between the last check and the write (or just after it). The receiver may
    # see such a run twice, like a request in flight at a crash (ADR 0022).
    late_sends: int = 0


class IdlePool:
    def __init__(self, *, per_key: int, total: int, idle_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.per_key = max(1, per_key)
        self.total = max(1, total)
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._by_key: dict[PoolKey, dict[Connection, None]] = {}  # oldest first
        self._all: dict[Connection, PoolKey] = {}  # oldest first, across keys
        # Parked connections found closed or expired at checkout: nothing had been written
        # on them, so the request goes out on another (counted, never a resend).
        self.discarded = 0

    def __len__(self) -> int:
        return len(self._all)

    def keys(self) -> int:
        return len(self._by_key)

    def checkout(self, key: PoolKey) -> Connection | None:
        """The most recently parked usable connection of ``key``, or None."""
        parked = self._by_key.get(key)
        if parked is None:
            return None
        now = self._clock()
        found: Connection | None = None
        while parked and found is None:
            connection, _ = parked.popitem()
            del self._all[connection]
            connection.on_idle_close = None
            if connection.usable and now - connection.idle_since < self.idle_seconds:
                found = connection
            else:
                self.discarded += 1
                connection.abort()
        if not parked:
            del self._by_key[key]
        if found is not None:
            found.reused = True
        return found

    def checkin(self, key: PoolKey, connection: Connection) -> None:
        """Park a usable connection; the oldest of the key, then overall, go past a cap."""
        connection.park()
        connection.idle_since = self._clock()
        connection.on_idle_close = self._discard
        parked = self._by_key.setdefault(key, {})
        parked[connection] = None
        self._all[connection] = key
        if len(parked) > self.per_key:
            self._close(next(iter(parked)))
        while len(self._all) > self.total:
            self._close(next(iter(self._all)))

    def evict_oldest(self) -> bool:
        """Close the connection idle longest (to make room for a new one)."""
        if not self._all:
            return False
        self._close(next(iter(self._all)))
        return True

    async def reap_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.reap()

    def reap(self) -> int:
        """Close every connection idle for ``idle_seconds`` or more; how many."""
        cutoff = self._clock() - self.idle_seconds
        closed = 0
        while self._all:
            oldest = next(iter(self._all))
            if oldest.idle_since > cutoff:
                break
            self._close(oldest)
            closed += 1
        return closed

    def close_all(self) -> int:
        closed = len(self._all)
        for connection in list(self._all):
            self._close(connection)
        return closed

    def _close(self, connection: Connection) -> None:
        self._discard(connection)
        connection.abort()

    def _discard(self, connection: Connection) -> None:
        key = self._all.pop(connection, None)
        connection.on_idle_close = None
        if key is None:
            return
        parked = self._by_key.get(key)
        if parked is not None:
            parked.pop(connection, None)
            if not parked:
                del self._by_key[key]
