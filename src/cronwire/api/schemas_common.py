"""What every body module of the tenant API shares: the ``Instant`` a client may give,
the input policy (unknown fields refused) and the way examples reach /openapi.json.

Input models check types only; the rules about values are the domain's (see
:mod:`cronwire.api.schemas_schedule_input`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, ConfigDict

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})"
)


# A "+" offset sent unencoded in a query string arrives as a space.
_PLUS_AS_SPACE = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})? \d{2}:\d{2}")
# Instants a client may give, in UTC: what datetime and the cron walk can still step past
# (a year-9999 local time with a negative offset is in year 10000 once in UTC).
EARLIEST_INSTANT = datetime(1, 1, 2, tzinfo=UTC)
LATEST_INSTANT = datetime(9999, 12, 30, tzinfo=UTC)


def _rfc3339_text(value: object) -> object:
    """pydantic would also read numbers as Unix timestamps ("0", -1); the contract speaks
    RFC 3339 only, so anything else is refused before parsing."""
    if isinstance(value, str) and _PLUS_AS_SPACE.fullmatch(value):
        raise ValueError("the offset's '+' arrived as a space; encode it as %2B in a query "
                         "string (e.g. 2027-01-01T00:00:00%2B01:00)")
    if not isinstance(value, str) or _RFC3339.fullmatch(value) is None:
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2027-01-01T00:00:00Z")
    return value


def _in_range(value: datetime) -> datetime:
    """The instant in UTC, if it lies where every later computation stays representable."""
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST_INSTANT <= utc <= LATEST_INSTANT:
        raise ValueError("must lie between 0001-01-02T00:00:00Z and 9999-12-30T00:00:00Z")
    return utc


def _in_range_as_written(value: datetime) -> datetime:
    """The instant with the offset it was written with, if it lies in range."""
    _in_range(value)
    return value


# An instant given by a client: RFC 3339 text with a UTC offset, nothing else.
Instant = Annotated[AwareDatetime, BeforeValidator(_rfc3339_text), AfterValidator(_in_range)]
# The same, keeping the offset written: explain reads 02:30+01:00 as the wall time 02:30.
WrittenInstant = Annotated[AwareDatetime, BeforeValidator(_rfc3339_text),
                           AfterValidator(_in_range_as_written)]

# Unknown fields are refused (a typo must not silently fall back to a default). Numbers
# and booleans are strict ("3" is not 3); strings and times parse as JSON gives them.
INPUT_CONFIG = ConfigDict(extra="forbid")


def with_examples(*examples: dict[str, Any]) -> ConfigDict:
    """A model config that shows ``examples`` in /openapi.json."""
    return ConfigDict(json_schema_extra={"examples": list(examples)})
