"""Connecting to the right server of a failover pair: host by host, each with a timeout of
its own, the last host that suited first.

asyncpg walks a multi-host URL itself and applies ``target_session_attrs``, but under one
timeout for the whole walk (asyncpg issue 1155): a dead first host that drops packets
instead of refusing them uses all of it, and the promoted standby second in the list is
never tried. So each host gets its own ``asyncpg.connect`` (which still checks the
session attributes), as libpq's ``connect_timeout`` is per host.

A writer never settles for a read-only server: its attribute is ``read-write`` unless the
URL asks for ``primary`` (``any``, libpq's default, would take a standby listed first).
"""

from __future__ import annotations

import logging
from typing import Any

import asyncpg

from cronwire.dsn import WRITABLE_ATTRS, parse_dsn

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_SECONDS = 5.0  # per host, unless the URL sets connect_timeout
# Failures after which the next host is tried: every one but a refused login, which is
# the same on every host of a pair and is raised at once, as libpq does. A server error is
# a reason to move on: a standby still starting up, or one that has not replayed a CREATE
# DATABASE yet ("database does not exist"), is no use, and the primary may be next.
NEXT_HOST_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError,
                    asyncpg.exceptions.TargetServerAttributeNotMatched)
LOGIN_REFUSED = asyncpg.exceptions.InvalidAuthorizationSpecificationError


class NoUsableServer(ConnectionError):
    """No host of the URL answered with a server of the kind asked for."""


class ServerFinder:
    """Opens connections for one URL (a pool's ``connect``, the migrator's, a command's)."""

    def __init__(self, dsn: str, *, writable: bool,
                 timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        self._dsn = parse_dsn(dsn)
        asked = self._dsn.target_session_attrs
        if writable:
            self.attrs = asked if asked in WRITABLE_ATTRS else "read-write"
        else:
            self.attrs = asked or "any"
        self._timeout = self._dsn.connect_timeout or timeout
        self._preferred = 0  # the host that suited last time

    def _order(self) -> list[int]:
        count = self._dsn.host_count
        return [self._preferred, *(i for i in range(count) if i != self._preferred)]

    async def connect(self, *args: Any, **kwargs: Any) -> asyncpg.Connection:
        """asyncpg's ``connect`` signature; the URL given here (a pool passes its own) is
        ignored in favour of the one this finder was made for."""
        kwargs.pop("dsn", None)
        timeout = kwargs.pop("timeout", None) or self._timeout  # a caller's: per host too
        failures: list[str] = []
        single = self._dsn.host_count == 1
        for index in self._order():
            try:
                conn = await asyncpg.connect(
                    self._dsn.for_host(index), timeout=timeout,
                    target_session_attrs=self.attrs, **kwargs)
            except LOGIN_REFUSED:
                raise
            except asyncpg.exceptions.TargetServerAttributeNotMatched as exc:
                failures.append(f"{self._dsn.host_label(index)}: {_reason(exc)}")
                continue
            except NEXT_HOST_ERRORS as exc:
                if single:
                    raise  # one server: its own error, as before there were several
                failures.append(f"{self._dsn.host_label(index)}: {_reason(exc)}")
                continue
            if index != self._preferred:
                log.info("connected to %s (target_session_attrs=%s)",
                         self._dsn.host_label(index), self.attrs)
                self._preferred = index
            return conn
        raise NoUsableServer(f"no server fits target_session_attrs={self.attrs}: "
                             + "; ".join(failures))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, asyncpg.exceptions.TargetServerAttributeNotMatched):
        return "not a server of that kind (a standby, or read-only)"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def connect_primary(dsn: str, **kwargs: Any) -> asyncpg.Connection:
    """One connection to the writable server of ``dsn`` (the migrator, admin commands)."""
    return await ServerFinder(dsn, writable=True).connect(**kwargs)


class ServerTurnedReadOnly(ConnectionError):
    """A pooled connection whose server is now read-only (a primary fenced or demoted)."""


def reports_read_only(conn: asyncpg.Connection) -> bool:
    """What the server last reported on this connection, no round trip: Postgres 14+
    reports ``in_hot_standby`` and ``default_transaction_read_only`` whenever they change
    (a promotion, a reload that fences a primary). An older server reports neither, and
    counts as writable: its writes would fail with ReadOnlySQLTransactionError instead."""
    settings = conn.get_settings()
    return "on" in (getattr(settings, "in_hot_standby", None),
                    getattr(settings, "default_transaction_read_only", None))
