"""cronwire's domain exceptions."""


class DomainError(Exception):
    """Base of cronwire's domain errors."""


class InvalidTarget(DomainError):
    """A schedule's target is malformed (bad scheme, host, userinfo, length, fragment)."""


class TargetRefused(DomainError):
    """A target's host is, or resolves to, an address deliveries must not reach."""
