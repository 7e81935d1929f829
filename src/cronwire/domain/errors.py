"""cronwire's domain exceptions."""


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


class InvalidTimezone(DomainError):
    """A time zone name is not a known IANA zone.

    The message is meant for humans and starts with ``"timezone: "``.
    """
