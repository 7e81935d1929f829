"""Project exceptions outside the pure domain.

Domain rule violations live in :mod:`cronwire.domain.errors`; this module holds
the errors of the running system (configuration, storage, migrations). Adapters
translate driver exceptions into these at their boundary so services and the
API never see asyncpg or aiokafka types.
"""


class CronwireError(Exception):
    """Base of every non-domain cronwire error."""


class ConfigError(CronwireError):
    """A configuration value is missing or malformed; the message names the variable."""


class MigrationError(CronwireError):
    """Migrations cannot be applied safely (e.g. an applied file was edited)."""


class StorageError(CronwireError):
    """The database rejected or failed an operation in a way callers may handle."""


class NotFound(CronwireError):
    """The object does not exist for this tenant (another tenant's object included)."""


class EmbeddedServerError(CronwireError):
    """An embedded development server (Postgres, broker) failed to start or stop."""


class BrokerError(CronwireError):
    """The Kafka broker cannot be reached or refused a request (kafka mode only)."""
