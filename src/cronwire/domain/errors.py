"""Every cronwire exception, in one module.

It lives in ``domain`` because the pure domain raises most of them and may import only
from ``cronwire.domain``; nothing here does I/O or imports anything, so adapters,
services, the API and the CLI can all import it too without pulling a dependency in.

Two families:

- :class:`DomainError`: a rule refused the input (a target, a cron expression, a time
  zone, one field of a schedule, a tenant's limit). The API answers 422 (or 429 for a
  limit) with the message, which names the field.
- :class:`CronwireError`: the running system failed (configuration, storage, migrations,
  the broker, an embedded server) or an object is missing. Adapters translate driver
  exceptions (asyncpg, OSError, aiokafka) into these at their boundary
  (``adapters/postgres/driver_errors.storage_errors``), so services and the API never
  see a driver's types.
"""


class DomainError(Exception):
    """Base of cronwire's domain errors."""


class InvalidTarget(DomainError):
    """A schedule's target is malformed (bad scheme, host, userinfo, length, fragment)."""


class TargetRefused(DomainError):
    """A target's host is, or resolves to, an address deliveries must not reach."""


class InvalidCron(DomainError):
    """A cron expression is malformed, unsupported or can never fire.

    The message is meant for humans and starts with ``"cron: "``.
    """


class InvalidRRule(DomainError):
    """An RFC 5545 recurrence rule is malformed, unsupported, never fires, or is too
    dense to evaluate within the bounds every evaluation keeps (domain/rrules.py).

    The message is meant for humans and starts with ``"rrule: "``.
    """


class InvalidTimezone(DomainError):
    """A time zone name is not a known IANA zone.

    The message is meant for humans and starts with ``"timezone: "``.
    """


class RuleViolation(DomainError):
    """One field of a schedule breaks a rule; ``str()`` is ``"<field>: <why>"``."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class LimitExceeded(DomainError):
    """A per-tenant limit (``max_schedules``, ``min_interval_seconds``, ...) is exceeded."""

    def __init__(self, limit: str, field: str | None, reason: str) -> None:
        super().__init__(f"{limit}: {reason}")
        self.limit = limit
        self.field = field
        self.reason = reason


class CronwireError(Exception):
    """Base of every non-domain cronwire error."""


class ConfigError(CronwireError):
    """A configuration value is missing or malformed; the message names the variable."""


class MigrationError(CronwireError):
    """Migrations cannot be applied safely (e.g. an applied file was edited)."""


class RequestNotSent(CronwireError):
    """A deliverer refused to write a request whose send window had closed (its lease was
    too old by then, e.g. the process was stopped while the request waited for a
    connection). Nothing reached the target, so no attempt is used."""


class StorageError(CronwireError):
    """The database rejected or failed an operation in a way callers may handle."""


class NotFound(CronwireError):
    """The object does not exist for this tenant (another tenant's object included)."""


class StateConflict(CronwireError):
    """The object exists but its state does not allow the request (resume a completed
    schedule, replay a run that did not fail or was replayed already): HTTP 409. The
    message says what state it is in and what would allow it."""


class VersionMismatch(StateConflict):
    """A change named the version it was made against (``If-Match``) and the object has
    moved on: HTTP 412 with the current version (``current``)."""

    def __init__(self, object_name: str, expected: int, current: int) -> None:
        super().__init__(f"If-Match: {object_name} is at version {current}, not {expected}; "
                         "read it again and reapply your change")
        self.expected = expected
        self.current = current


class EmbeddedServerError(CronwireError):
    """An embedded development server (Postgres, broker) failed to start or stop."""


class BrokerError(CronwireError):
    """The Kafka broker cannot be reached or refused a request (kafka mode only)."""
