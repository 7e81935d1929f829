"""Pure cron maths: parse expressions, list fire instants in UTC.

Syntax is the part that croniter and cronsim both accept (5 fields, or 6
with seconds first; lists, ranges, steps, JAN..DEC and SUN..SAT names,
``@hourly``-style macros), plus the Quartz/EventBridge day tokens: ``L``,
``L-n``, ``nW`` and ``LW`` in day-of-month, ``weekday#n`` and ``weekdayL`` in
day-of-week (ADR 0058). Meaning follows Debian cron as cronsim implements it: day-of-month
and day-of-week are OR-ed unless either field starts with ``*``; ranges
with equal ends are refused, as croniter and cronsim read them differently.
Walking local time and the DST rule live in ``dst.py``; ADR 0003 records
why. Nothing here reads the clock or does I/O.
"""

from __future__ import annotations

import calendar
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from itertools import pairwise
from zoneinfo import ZoneInfo, available_timezones

from croniter import croniter

from cronwire.domain.dst import EPOCH, EPOCH_UTC, LocalPattern, NextLocal, utc_instants
from cronwire.domain.errors import InvalidCron, InvalidTimezone
from cronwire.domain.rrules import RRuleSpec, is_rrule, parse_rrule

__all__ = ["CronSpec", "load_timezone", "min_gap_seconds", "next_occurrences"]
__all__ += ["occurrences_between", "parse_cron", "parse_timetable"]

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
_DAYS = "SUN MON TUE WED THU FRI SAT".split()
# (name, low, high, symbolic names) in 6-field order, seconds first.
_FIELDS = (
    ("second", 0, 59, ()),
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_MAX_EXPR_LEN = 256


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A parsed cron expression."""

    expr: str
    has_seconds: bool
    is_wall_clock: bool  # minute and hour fields both free of '*': see dst.py
    pattern: LocalPattern  # the local wall-clock times it matches

    def walker(self) -> NextLocal:
        """The matcher the DST walk steps with (an RRuleSpec gives one of its own)."""
        return self.pattern.next_local


def _bad(name: str, text: str, why: str) -> InvalidCron:
    return InvalidCron(f"cron: bad {name} field {text!r}: {why}")


def _value(index: int, text: str) -> int:
    name, low, high, names = _FIELDS[index]
    if text in names:
        return names.index(text) + low
    if not text.isdigit():
        raise _bad(name, text, "not a number" + (" or name" if names else ""))
    value = int(text)
    if not low <= value <= high:
        raise _bad(name, text, f"{value} is outside {low}-{high}")
    return value


@dataclass(slots=True)
class _Days:
    """The Quartz/EventBridge day tokens one day field holds (see LocalPattern)."""

    from_last: set[int] = field(default_factory=set)  # 'L' (0), 'L-n' (n)
    nearest_weekday: set[int] = field(default_factory=set)  # 'nW'
    last_workday: bool = False  # 'LW'
    nth: set[tuple[int, int]] = field(default_factory=set)  # 'd#n'
    last_weekdays: set[int] = field(default_factory=set)  # 'dL'

    def any(self) -> bool:
        return bool(self.from_last or self.nearest_weekday or self.last_workday
                    or self.nth or self.last_weekdays)


def _day_token(index: int, item: str, days: _Days) -> bool:
    """Record ``item`` in ``days`` if it is one of the day tokens; False if it is not."""
    name = _FIELDS[index][0]
    if name == "day-of-month":
        if item == "LW":
            days.last_workday = True
        elif item == "L" or item.startswith("L-"):
            n = item[2:] if item != "L" else "0"
            if not n.isdigit() or not 0 <= int(n) <= 30:
                raise _bad(name, item, "the n in 'L-n' must be 0-30")
            days.from_last.add(int(n))
        elif item.endswith("W") and item[:-1].isdigit():
            days.nearest_weekday.add(_value(index, item[:-1]))
        else:
            return False
        return True
    if name == "day-of-week":
        if "#" in item:
            day, _, n = item.partition("#")
            if not n.isdigit() or not 1 <= int(n) <= 5:
                raise _bad(name, item, "the n in 'weekday#n' must be 1-5")
            days.nth.add((_value(index, day) % 7, int(n)))
        elif len(item) > 1 and item.endswith("L"):
            days.last_weekdays.add(_value(index, item[:-1]) % 7)
        else:
            return False
        return True
    return False


def _field(index: int, text: str) -> tuple[set[int], _Days]:
    """Values and day tokens one field allows."""
    name, low, high, _ = _FIELDS[index]
    values: set[int] = set()
    days = _Days()
    for item in text.split(","):
        if _day_token(index, item, days):
            continue
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise _bad(name, item, "a step must be a positive number")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, second = base.partition("-")
            start, end = _value(index, first), _value(index, second)
            if end <= start:
                # croniter reads 'a-a' as the whole field, cronsim reads 'a-a/s'
                # as 'a/s': refuse rather than pick a meaning.
                raise _bad(name, item, "a range needs a low end below its high end")
        else:
            start = _value(index, base)
            end = high if slash else start
        values.update(range(start, end + 1, step))
    if name == "day-of-week":
        values = {v % 7 for v in values}
    if not (values or days.any()):
        raise _bad(name, text, "empty")
    return values, days


def _gate_form(index: int, text: str) -> str:
    """``text`` with the day tokens croniter does not read ('L-n', 'LW', 'nW', 'dL')
    replaced by a plain value, so the croniter gate judges the rest of the syntax."""
    if index not in (3, 5):
        return text
    items = []
    for item in text.split(","):
        days = _Days()
        if _day_token(index, item, days) and "#" not in item and item != "L":
            item = "1"
        items.append(item)
    return ",".join(items)


@lru_cache(maxsize=4096)
def parse_cron(expr: str) -> CronSpec:
    """Parse a 5-field, 6-field (seconds first) or ``@macro`` expression.

    Raises InvalidCron("cron: <why>") for anything malformed, outside the
    syntax both croniter and cronsim accept, or that can never fire.
    """
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidCron("cron: expression must be a non-empty string")
    if len(expr) > _MAX_EXPR_LEN or not expr.isascii():
        raise InvalidCron(f"cron: expression must be ASCII and at most {_MAX_EXPR_LEN} characters")
    text = expr.strip()
    if text.startswith("@"):
        if text.lower() not in _MACROS:
            raise InvalidCron(f"cron: unsupported macro {text!r} (use one of {', '.join(_MACROS)})")
        text = _MACROS[text.lower()]
    parts = text.upper().split()
    if len(parts) not in (5, 6):
        raise InvalidCron(
            "cron: expected 5 fields (minute hour day-of-month month day-of-week) "
            f"or 6 with seconds first, got {len(parts)}"
        )
    has_seconds = len(parts) == 6
    fields = parts if has_seconds else ["0", *parts]
    parsed = [_field(i, part) for i, part in enumerate(fields)]
    days, day_tokens = parsed[3]
    weekdays, weekday_tokens = parsed[5]
    day_and = fields[3].startswith("*") or fields[5].startswith("*")
    months = tuple(sorted(parsed[4][0]))
    if day_and and days and not day_tokens.any():
        longest = max(calendar.monthrange(2024, m)[1] for m in months)  # 2024: leap year
        if min(days) > longest:
            raise InvalidCron(
                f"cron: day-of-month {min(days)} never occurs in month(s) {fields[4]}"
            )
    pattern = LocalPattern(
        seconds=tuple(sorted(parsed[0][0])),
        minutes=tuple(sorted(parsed[1][0])),
        hours=tuple(sorted(parsed[2][0])),
        days=frozenset(days),
        months=months,
        weekdays=frozenset(weekdays),
        nth_weekdays=frozenset(weekday_tokens.nth),
        day_and=day_and,
        from_last=frozenset(day_tokens.from_last),
        nearest_weekday=frozenset(day_tokens.nearest_weekday),
        last_workday=day_tokens.last_workday,
        last_weekdays=frozenset(weekday_tokens.last_weekdays),
    )
    if not pattern.fires_some_day():
        raise InvalidCron(f"cron: {expr.strip()!r} never fires (no date satisfies its day fields)")
    # The gate that keeps syntax inside what croniter also accepts (it refuses,
    # e.g., '1,2#3'); its *meaning* is not used, see the module docstring.
    gate = [_gate_form(i, part) for i, part in enumerate(fields)]
    if not croniter.is_valid(" ".join(gate if has_seconds else gate[1:]),
                             second_at_beginning=has_seconds):
        raise InvalidCron(f"cron: unsupported syntax in {expr.strip()!r}")
    return CronSpec(
        expr=expr.strip(),
        has_seconds=has_seconds,
        is_wall_clock="*" not in fields[1] and "*" not in fields[2],
        pattern=pattern,
    )


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones()) - {"localtime", "posixrules"}


@lru_cache(maxsize=1)
def _zone_spellings() -> dict[str, str]:
    return {name.casefold(): name for name in _zone_names()}


def canonical_timezone(name: str) -> str:
    """The IANA spelling of ``name`` when it differs only in case ("utc" -> "UTC",
    "europe/berlin" -> "Europe/Berlin"); otherwise ``name`` unchanged (an unknown zone
    stays unknown, for load_timezone to refuse)."""
    if not isinstance(name, str) or name in _zone_names():
        return name
    return _zone_spellings().get(name.casefold(), name)


@lru_cache(maxsize=1024)
def load_timezone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; InvalidTimezone("timezone: ...") if there is none."""
    if not isinstance(name, str) or name not in _zone_names():
        raise InvalidTimezone(f"timezone: unknown IANA time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError) as exc:
        raise InvalidTimezone(f"timezone: unknown IANA time zone {name!r}") from exc


def _naive_utc(name: str, value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime")
    return EPOCH + (value - EPOCH_UTC)


class _Memo:
    """A thread-safe LRU bounded by entries and by datetimes held in total.

    Bounding the datetimes too keeps a few huge previews or catch-up windows
    from pinning gigabytes; the planner's small windows are what it is for.
    """

    def __init__(self, max_entries: int = 65536, max_items: int = 1_000_000) -> None:
        self._data: OrderedDict[object, tuple[datetime, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self._max_entries, self._max_items, self._items = max_entries, max_items, 0

    def get(self, key: object) -> tuple[datetime, ...] | None:
        with self._lock:
            found = self._data.get(key)
            if found is not None:
                self._data.move_to_end(key)
            return found

    def put(self, key: object, value: tuple[datetime, ...]) -> None:
        if len(value) > self._max_items // 16:
            return
        with self._lock:
            old = self._data.pop(key, None)
            self._items += len(value) - (len(old) if old is not None else 0)
            self._data[key] = value
            while len(self._data) > self._max_entries or self._items > self._max_items:
                self._items -= len(self._data.popitem(last=False)[1])


_memo = _Memo()


def parse_timetable(expr: str) -> CronSpec | RRuleSpec:
    """A stored timetable: an RFC 5545 rule (``domain/rrules.py``) or a cron expression.
    Raises InvalidRRule or InvalidCron."""
    return parse_rrule(expr) if is_rrule(expr) else parse_cron(expr)


def _compute(
    cron: str, timezone: str, after: datetime, until: datetime | None, limit: int
) -> tuple[datetime, ...]:
    spec = parse_timetable(cron)
    tz = load_timezone(timezone)
    start = _naive_utc("after", after)
    end = None if until is None else _naive_utc("until", until)
    found: list[datetime] = []
    if limit <= 0 or (end is not None and end <= start):
        return ()
    try:
        for instant in utc_instants(spec.walker(), tz, start, wall_clock=spec.is_wall_clock):
            if end is not None and instant > end:
                break
            found.append(EPOCH_UTC + (instant - EPOCH))
            if len(found) >= limit:
                break
    except OverflowError:  # walked off datetime's range (year 9999)
        pass
    return tuple(found)


def _cached(
    cron: str, timezone: str, after: datetime, until: datetime | None, limit: int
) -> list[datetime]:
    key = (cron, timezone, after, until, limit)
    found = _memo.get(key)
    if found is None:
        found = _compute(cron, timezone, after, until, limit)
        _memo.put(key, found)
    return list(found)


def occurrences_between(
    cron: str, timezone: str, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """Fire instants in ``(after, until]``, oldest first, at most ``limit``, aware UTC.
    ``cron`` is a stored timetable: a cron expression or an RFC 5545 rule (rrules.py).

    Memoised on the arguments: many schedules share cron, zone and window.
    The returned list is the caller's own.
    """
    return _cached(cron, timezone, after, until, limit)


def next_occurrences(
    cron: str,
    timezone: str,
    after: datetime,
    count: int,
    *,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
) -> list[datetime]:
    """The next ``count`` fire instants strictly after ``after``, aware UTC.

    None is before ``starts_at`` (an occurrence exactly at it is kept) or
    after ``ends_at``.
    """
    if starts_at is not None and starts_at > after:
        after = starts_at - timedelta(microseconds=1)
    if ends_at is not None and ends_at <= after:
        return []
    return _cached(cron, timezone, after, ends_at, count)


def min_gap_seconds(cron: str, timezone: str, now: datetime, sample: int = 50) -> float:
    """Smallest gap in seconds between consecutive fires among the next ``sample``.

    ``math.inf`` when fewer than two fires exist.
    """
    fires = next_occurrences(cron, timezone, now, max(sample, 2))
    gaps = [(b - a).total_seconds() for a, b in pairwise(fires)]
    return min(gaps, default=math.inf)

