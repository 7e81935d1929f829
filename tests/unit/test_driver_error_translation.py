"""asyncpg's protocol-state error is a storage error too.

Found by `cronwire chaos --faults pg-restart`: while Postgres shut down, a connection the
server had just terminated was handed to the resolution writer's lease check, asyncpg
raised InternalClientError ("cannot switch to state 11; another operation is in
progress"), which is not an InterfaceError, and the untranslated exception crashed the
writer loop and stopped the replica (its 20 leases were delivered again elsewhere).
"""

from __future__ import annotations

import asyncpg
import pytest

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.domain.errors import StorageError


@pytest.mark.parametrize("error", [
    asyncpg.exceptions.InternalClientError("cannot switch to state 11; another operation (2) "
                                           "is in progress"),
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"),
    ConnectionResetError(104, "Connection reset by peer"),
], ids=lambda e: type(e).__name__)
def test_a_broken_connection_is_a_storage_error(error: Exception) -> None:
    with pytest.raises(StorageError, match="renew leases") as raised, storage_errors("renew leases"):
        raise error
    assert raised.value.__cause__ is error
