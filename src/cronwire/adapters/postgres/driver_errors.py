"""Translate asyncpg's failures into :class:`cronwire.domain.errors.StorageError` at the boundary."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import asyncpg

from cronwire.domain.errors import StorageError

# What a lost connection, a server error or a pool timeout looks like from asyncpg.
# InternalClientError: a connection the server terminated mid-operation can be handed out
# in a state asyncpg refuses to use (seen while Postgres shut down, `chaos --faults
# pg-restart`); it is not an InterfaceError. A server that cannot take writes (connect.py:
# no host fits, a pooled connection turned read-only; a ReadOnlySQLTransactionError is a
# PostgresError) is an outage too: the loops retry, and the pool finds the new primary.
# NoUsableServer and ServerTurnedReadOnly are ConnectionErrors, so OSError covers them.
DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError,
                 asyncpg.exceptions.InternalClientError, OSError, TimeoutError)


@contextlib.contextmanager
def storage_errors(action: str) -> Iterator[None]:
    """Re-raise driver errors as StorageError naming ``action``; the cause is chained."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        raise StorageError(f"{action}: {type(exc).__name__}: {exc}") from exc
