"""Former home of the system errors, kept as an alias so existing imports keep working.

Every exception is defined in :mod:`cronwire.domain.errors`; import from there.
"""

from cronwire.domain.errors import (
    BrokerError,
    ConfigError,
    CronwireError,
    EmbeddedServerError,
    MigrationError,
    NotFound,
    StorageError,
)

__all__ = [
    "BrokerError",
    "ConfigError",
    "CronwireError",
    "EmbeddedServerError",
    "MigrationError",
    "NotFound",
    "StorageError",
]
