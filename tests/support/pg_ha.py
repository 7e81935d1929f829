"""A real failover pair for tests: a primary and a hot standby streaming from it on
loopback TCP, built from the embedded server's binaries (cronwire.adapters.embedded.
postgres_pair). Each test gets its own pair, since failing over is what it does to it.

The data lives in a directory of our own (``servers.own_directory``), not under pytest's
temp root: as root the servers run as ``cronwire-pg``, which needs o+x on every parent,
and pytest turns its root back to 0700 whenever another pytest starts.

Typical use (``pg_pair`` and ``async_pg_pair`` are fixtures in tests/conftest.py)::

    async def test_x(pg_pair: EmbeddedPostgresPair) -> None:
        dsn = await ha_database(pg_pair)          # migrated, both hosts, read-write
        ...
        await asyncio.to_thread(pg_pair.kill_primary)
        await asyncio.to_thread(pg_pair.promote)
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator

from cronwire.adapters.embedded.postgres_pair import EmbeddedPostgresPair
from cronwire.bootstrap.factories import fresh_database
from tests.support.servers import own_directory


@contextlib.contextmanager
def postgres_pair(*, synchronous: bool = True) -> Iterator[EmbeddedPostgresPair]:
    with own_directory("cronwire-ha-") as root:
        pair = EmbeddedPostgresPair(root / "pair", synchronous=synchronous)
        try:
            pair.start()
            yield pair
        finally:
            pair.stop()


async def ha_database(pair: EmbeddedPostgresPair, *, replayed: bool = True) -> str:
    """A fresh migrated database on the pair; its URL names both hosts, primary first.
    With ``replayed`` it returns once the standby shows it, so a test may read there."""
    name = f"cw_ha_{uuid.uuid4().hex[:10]}"
    dsn = await fresh_database(pair.dsn(), name)
    if replayed:
        await asyncio.to_thread(pair.wait_replayed, name)
    return dsn


def single_host(pair: EmbeddedPostgresPair, dsn: str, *, standby: bool) -> str:
    """``dsn`` (one of the pair's) narrowed to one server, without its parameters."""
    server = pair.standby if standby else pair.primary
    hosts = f"{pair.primary.host}:{pair.primary.port},{pair.standby.host}:{pair.standby.port}"
    return dsn.replace(hosts, f"{server.host}:{server.port}").partition("?")[0]
