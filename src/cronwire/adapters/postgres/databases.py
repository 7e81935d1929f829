"""Whole databases on a server: the load-test and chaos harnesses give every run a fresh one."""

from __future__ import annotations

from cronwire.adapters.postgres.connect import connect_primary
from cronwire.dsn import parse_dsn


async def create_database(admin_dsn: str, name: str) -> str:
    """Create database ``name`` (a plain identifier the caller made up) on the primary of
    ``admin_dsn``; returns its URL (every host of ``admin_dsn``, its parameters kept). An
    identifier cannot be a bind parameter, hence the quoted name in the statement text."""
    conn = await connect_primary(admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return parse_dsn(admin_dsn).with_database(name)
