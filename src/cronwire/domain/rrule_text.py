"""The text of an RFC 5545 rule as cronwire accepts it (see rrules.py): its lines, the
checks that name what is wrong, the canonical form it is stored in, and its parts as
dateutil's rrule() arguments. Pure: no clock, no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from dateutil.rrule import rrule
from dateutil.rrule import weekday as dateutil_weekday

from cronwire.domain.errors import InvalidRRule

MAX_RRULE_CHARS = 8192
MAX_DATES = 1000  # EXDATE and RDATE values together
MAX_COUNT = 10_000
FREQS = {"YEARLY": 0, "MONTHLY": 1, "WEEKLY": 2, "DAILY": 3, "HOURLY": 4, "MINUTELY": 5,
          "SECONDLY": 6}
_PARTS = frozenset({"FREQ", "UNTIL", "COUNT", "INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR",
                    "BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS",
                    "WKST"})
_STAMP = re.compile(r"^(\d{8}T\d{6})(Z?)$")
DAY_PARTS = ("BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYDAY")
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


def bad(why: str) -> InvalidRRule:
    return InvalidRRule(f"rrule: {why}")


def is_rrule(text: str) -> bool:
    """Whether a stored timetable is a recurrence rule (a cron expression never holds
    '=' or ':'; every rule holds ``RRULE:``)."""
    return "RRULE:" in text.upper()


@dataclass(frozen=True, slots=True)
class RuleLines:
    dtstart: datetime | None
    parts: dict[str, str]  # the RRULE line's NAME=VALUE parts, names upper-case
    exdates: tuple[datetime, ...]
    rdates: tuple[datetime, ...]


def _local(value: str, zone: ZoneInfo | None, what: str) -> datetime:
    """A DATE-TIME value as a naive local time; ``...Z`` converted into ``zone``."""
    found = _STAMP.match(value.strip().upper())
    if found is None:
        raise bad(f"{what} {value!r} is not a date-time (YYYYMMDDTHHMMSS, local or with Z)")
    try:
        stamp = datetime.strptime(found.group(1), "%Y%m%dT%H%M%S")
    except ValueError:
        raise bad(f"{what} {value!r} is not a real date-time") from None
    if not found.group(2):
        return stamp
    if zone is None:
        raise bad(f"{what} {value!r}: stored rules hold local times only")
    try:
        return stamp.replace(tzinfo=UTC).astimezone(zone).replace(tzinfo=None, fold=0)
    except (OverflowError, ValueError):
        raise bad(f"{what} {value!r} is out of range") from None


def _params_ok(name: str, params: list[str], zone: ZoneInfo | None, timezone: str) -> None:
    for param in params:
        key, _, value = param.partition("=")
        key = key.upper()
        if key == "VALUE" and value.upper() == "DATE-TIME":
            continue
        if key == "TZID" and value == timezone:
            continue
        if key == "VALUE":
            raise bad(f"{name} takes date-times (exclude whole days with a calendar: "
                       "exclude_calendars)")
        if key == "TZID":
            raise bad(f"{name}'s TZID must be the schedule's timezone ({timezone}); its "
                       "times are read in that zone")
        raise bad(f"{name}: unsupported parameter {key!r}")


def split_lines(text: str, zone: ZoneInfo | None, timezone: str) -> RuleLines:
    if not isinstance(text, str) or not text.strip():
        raise bad("must be a non-empty string")
    if len(text) > MAX_RRULE_CHARS or not text.isascii():
        raise bad(f"must be ASCII and at most {MAX_RRULE_CHARS} characters")
    dtstart: datetime | None = None
    parts: dict[str, str] | None = None
    exdates: list[datetime] = []
    rdates: list[datetime] = []
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if not line:
            continue
        head, colon, value = line.partition(":")
        if not colon:
            raise bad(f"line {line[:40]!r} has no ':' (write NAME:VALUE lines)")
        name, *params = head.split(";")
        name = name.upper()
        if name not in ("DTSTART", "RRULE", "EXDATE", "RDATE"):
            raise bad(f"unsupported line {name!r} (give DTSTART, RRULE, EXDATE and RDATE "
                       "lines)")
        if name == "RRULE":
            if parts is not None:
                raise bad("give exactly one RRULE line")
            if params:
                raise bad("the RRULE line takes no parameters")
            parts = _rule_parts(value)
            continue
        _params_ok(name, params, zone, timezone)
        if name == "DTSTART":
            if dtstart is not None:
                raise bad("give at most one DTSTART line")
            dtstart = _local(value, zone, "DTSTART")
            continue
        found = [_local(v, zone, name) for v in value.split(",")]
        (exdates if name == "EXDATE" else rdates).extend(found)
        if len(exdates) + len(rdates) > MAX_DATES:
            raise bad(f"at most {MAX_DATES} EXDATE and RDATE values together")
    if parts is None:
        raise bad("give exactly one RRULE line (e.g. RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9)")
    if "UNTIL" in parts:
        parts["UNTIL"] = _local(parts["UNTIL"], zone, "UNTIL").strftime("%Y%m%dT%H%M%S")
    return RuleLines(dtstart, parts, tuple(sorted(set(exdates))), tuple(sorted(set(rdates))))


def _rule_parts(value: str) -> dict[str, str]:
    parts: dict[str, str] = {}
    for item in value.strip().split(";"):
        if not item:
            continue
        key, eq, part = item.partition("=")
        key = key.strip().upper()
        if not eq or key not in _PARTS:
            raise bad(f"unsupported RRULE part {item[:40]!r}")
        if key in parts:
            raise bad(f"RRULE part {key} given twice")
        parts[key] = part.strip().upper()
    if parts.get("FREQ") not in FREQS:
        raise bad(f"FREQ must be one of {', '.join(FREQS)}")
    if "COUNT" in parts and "UNTIL" in parts:
        raise bad("give COUNT or UNTIL, not both (RFC 5545)")
    if "COUNT" in parts and not (parts["COUNT"].isdigit()
                                 and 1 <= int(parts["COUNT"]) <= MAX_COUNT):
        raise bad(f"COUNT must be between 1 and {MAX_COUNT:,}")
    return parts


def render(lines: RuleLines) -> str:
    assert lines.dtstart is not None
    out = [f"DTSTART:{lines.dtstart:%Y%m%dT%H%M%S}",
           "RRULE:" + ";".join(f"{k}={v}" for k, v in lines.parts.items())]
    if lines.exdates:
        out.append("EXDATE:" + ",".join(f"{d:%Y%m%dT%H%M%S}" for d in lines.exdates))
    if lines.rdates:
        out.append("RDATE:" + ",".join(f"{d:%Y%m%dT%H%M%S}" for d in lines.rdates))
    return "\n".join(out)


def day_filter_rule(day_parts: dict[str, str]) -> rrule:
    """The days a DAILY-or-finer rule's day-level parts keep, as a YEARLY rule: dateutil
    walks a DAILY rule day by day (and an HOURLY one hour by hour) through the days its
    parts exclude, but lays out a YEARLY rule's days a year at a time, by the same
    filters. RFC 5545 gives BYDAY no ordinal at these frequencies."""
    if re.search(r"\d", day_parts.get("BYDAY", "")):
        raise bad("BYDAY takes no ordinal (like 1MO) with FREQ DAILY or finer (RFC 5545)")
    parts = {"FREQ": "YEARLY", **day_parts}
    if not ({"BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY"} & parts.keys()):
        # BYMONTH alone: every day of those months (dateutil would default a YEARLY
        # rule's day of the month to DTSTART's)
        parts["BYMONTHDAY"] = ",".join(str(d) for d in range(1, 32))
    try:
        return rrule(**rule_kwargs(parts), dtstart=datetime(2000, 1, 1))
    except (ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
        raise bad(f"dateutil refused it: {exc}") from None


def rule_kwargs(parts: dict[str, str]) -> dict[str, object]:
    """The RRULE parts as dateutil's rrule() arguments (its own rrulestr does the same,
    but also accepts forms RFC 5545 does not, and reads times we pinned down already)."""
    def ints(key: str) -> list[int]:
        try:
            return [int(v) for v in parts[key].split(",")]
        except ValueError:
            raise bad(f"{key} must be a list of integers") from None

    out: dict[str, object] = {"freq": FREQS[parts["FREQ"]]}
    for key in ("BYSECOND", "BYMINUTE", "BYHOUR", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO",
                "BYMONTH", "BYSETPOS"):
        if key in parts:
            out[key.lower()] = ints(key)
    if "INTERVAL" in parts:
        interval = ints("INTERVAL")
        if len(interval) != 1 or not 1 <= interval[0] <= 100_000:
            raise bad("INTERVAL must be between 1 and 100,000")
        out["interval"] = interval[0]
    if "COUNT" in parts:
        out["count"] = int(parts["COUNT"])
    if "UNTIL" in parts:
        out["until"] = datetime.strptime(parts["UNTIL"], "%Y%m%dT%H%M%S")
    if "WKST" in parts:
        if parts["WKST"] not in _WEEKDAYS:
            raise bad("WKST must be one of MO..SU")
        out["wkst"] = _WEEKDAYS.index(parts["WKST"])
    if "BYDAY" in parts:
        days = []
        for item in parts["BYDAY"].split(","):
            found = re.fullmatch(r"([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)", item)
            if found is None:
                raise bad(f"BYDAY item {item!r} is not [n]MO..SU")
            n = int(found.group(1)) if found.group(1) else None
            if n == 0:
                raise bad(f"BYDAY item {item!r}: n must not be 0")
            days.append(dateutil_weekday(_WEEKDAYS.index(found.group(2)), n))
        out["byweekday"] = days
    return out
