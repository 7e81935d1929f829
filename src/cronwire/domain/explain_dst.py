"""The DST side of explain (pure): which wall time an instant asks about, and the sentence
saying how a daylight-saving transition moved or dropped the local time the cron matches,
by the rule the planner applies (:mod:`cronwire.domain.dst`).

An instant written as a wall time its zone skipped (2027-03-28T02:30:00+01:00 in Berlin,
the documented example) asks about that wall time, which DST moved to the gap's end; so
does the transition instant itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

from cronwire.domain.cron import load_timezone, parse_timetable
from cronwire.domain.dst import EPOCH, EPOCH_UTC, gap_end, offsets

_MICRO = timedelta(microseconds=1)


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _local(instant: datetime, timezone: str) -> str:
    return instant.astimezone(load_timezone(timezone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def _skipped_wall(tz: tzinfo, at: datetime) -> tuple[datetime, datetime] | None:
    """``at`` written as a wall time its zone skipped, with one of the two offsets around
    the jump (2027-03-28T02:30:00+01:00 in Berlin, where the clocks went from 02:00 to
    03:00): that naive wall time and the transition instant the gap collapsed into; None
    otherwise. Whoever writes a skipped wall time means it, although the instant it
    spells with the old offset (01:30Z) lies after the jump."""
    written = at.replace(tzinfo=None)
    off0, off1 = offsets(tz, written)
    if not off0 < off1 or at.utcoffset() not in (off0, off1):
        return None
    return written, EPOCH_UTC + (gap_end(tz, written, off0, off1) - EPOCH)


def asked_instant(timezone: str, at: datetime) -> datetime:
    """The instant explained for ``at``: the transition instant when ``at`` is written as
    a wall time the schedule's zone skipped (where the planner puts a wall-clock
    schedule's run for it), else ``at``."""
    skipped = _skipped_wall(load_timezone(timezone), at)
    return at if skipped is None else skipped[1]


def _asked_local(tz: tzinfo, at: datetime) -> datetime:
    """The naive local wall time ``at`` asks about: a skipped wall time as written; the
    gap's start when ``at`` is the spring-forward transition itself (03:00 CEST is where
    the skipped 02:xx times fire); else ``at`` on the zone's clock (fold=0)."""
    skipped = _skipped_wall(tz, at)
    if skipped is not None:
        return skipped[0]
    seen = at.astimezone(tz)
    before = (at - _MICRO).astimezone(tz)
    if (before.utcoffset() or timedelta(0)) < (seen.utcoffset() or timedelta(0)):
        return before.replace(tzinfo=None) + _MICRO
    return seen.replace(tzinfo=None, fold=0)


def dst_note(cron: str, timezone: str, at: datetime) -> str | None:
    """Which DST rule moved or dropped the first local time the cron matches at or after
    the wall time ``at`` asks about, in words; None when that local time is an ordinary one."""
    spec = parse_timetable(cron)  # a cron expression or an RFC 5545 rule
    tz = load_timezone(timezone)
    local = _asked_local(tz, at)
    if local.microsecond:
        local = local.replace(microsecond=0) + timedelta(seconds=1)
    match = spec.walker()(local)
    if match is None:
        return None
    off0, off1 = offsets(tz, match)
    wall = match.strftime("%H:%M:%S" if spec.has_seconds else "%H:%M")
    day = match.strftime("%Y-%m-%d")
    if off0 < off1:  # a gap: spring forward
        end = EPOCH_UTC + (gap_end(tz, match, off0, off1) - EPOCH)
        if spec.is_wall_clock:
            return (f"DST moved it: {wall} did not exist on {day} in {timezone} (the clocks "
                    f"jumped forward at {_local(end, timezone)}), and a wall-clock schedule "
                    f"fires once at the end of the gap instead")
        return (f"DST dropped {wall} on {day}: it did not exist in {timezone} (the clocks "
                f"jumped forward at {_local(end, timezone)}), and an interval schedule "
                f"follows real time, so nothing fires inside the skipped hour")
    if off0 > off1:  # a fold: fall back
        first = EPOCH_UTC + (match - off0 - EPOCH)
        if spec.is_wall_clock and at > first:
            return (f"DST dropped the repeat of {wall} on {day}: the clocks fell back in "
                    f"{timezone} so it occurred twice, and a wall-clock schedule fires only "
                    f"at the first, {_iso(first)}")
        if spec.is_wall_clock:
            return (f"{wall} on {day} occurs twice in {timezone} (the clocks fall back); a "
                    f"wall-clock schedule fires once, at the first")
        return (f"{wall} on {day} occurs twice in {timezone} (the clocks fall back); an "
                f"interval schedule follows real time and fires at both")
    return None
