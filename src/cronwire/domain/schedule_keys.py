"""A schedule's ``key`` (the tenant's own stable name for it, unique among its live
schedules) and ``managed_by`` (the label of the tool that manages it): what each may hold.
Pure, no I/O; migration 0027 states the same rules as CHECKs."""

from __future__ import annotations

import re

from cronwire.domain.errors import RuleViolation
from cronwire.domain.labels import check_label

KEY_MAX_CHARS = 128
MANAGED_BY_MAX_CHARS = 200
# A slug: safe in a URL path segment, a file name and an environment variable's stem.
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
KEY_RULE = "[a-z0-9][a-z0-9._-]{0,127}"


def check_key(key: str, field: str = "key") -> str:
    """``key`` if it is a valid schedule key, else a RuleViolation naming ``field``."""
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise RuleViolation(field, f"must match {KEY_RULE} (lower-case letters, digits, "
                            "'.', '_' and '-', starting with a letter or digit)")
    return key


def check_managed_by(label: str, field: str = "managed_by") -> str:
    """``label`` if it can name a managing tool (a label of at most 200 characters)."""
    check_label(field, label, MANAGED_BY_MAX_CHARS)
    return label
