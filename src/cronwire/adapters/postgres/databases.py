"""Whole databases on a server: the load-test and chaos harnesses give every run a fresh one."""

from __future__ import annotations

import asyncpg


async def create_database(admin_dsn: str, name: str) -> str:
    """Create database ``name`` (a plain identifier the caller made up) on the server of
    ``admin_dsn``; returns its DSN. An identifier cannot be a bind parameter, hence the
    quoted name in the statement text."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    base, _, _ = admin_dsn.rpartition("/")
    return f"{base}/{name}"
