"""Property tests for cronwire.domain.cron against two independent oracles.

1. A brute-force walker written here: it steps through every UTC minute (or
   second, for 6-field expressions) of a window, reads the local time, and
   applies the contract's DST rule literally. Field matching comes from
   cronsim's parser, not from ours.
2. cronsim itself (healthchecks.io), whose DST rule the contract adopts,
   for every 5-field expression and for 6-field interval expressions.

Known, deliberate divergences from cronsim (ADR 0003), kept out of the
cronsim comparison only -- the brute-force test still covers them:
- 6-field wall-clock expressions: cronsim applies Debian's rule to 5-field
  expressions only; the contract applies it to both.
- a '*' that is not the first character of the minute/hour field
  ('0,*/30'): cronsim (like Debian) looks at the first character only,
  the contract says "without '*'". The generator below never produces it;
  tests/unit/test_cron_table.py pins the difference.

And one class of cronsim defects, which the cronsim test tolerates only
where documented and where the brute-force walker sides with us: see
CRONSIM_REAL_TIME_DEFECT_ZONES below.

3 tests x 3,500 examples = 10,500 cases, derandomised; ~25 s on 2 cores.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from cronsim import CronSim
from cronsim.cronsim import CronSimError
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

from cronwire.domain.cron import next_occurrences, occurrences_between, parse_cron
from cronwire.domain.errors import InvalidCron

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # 30-minute DST
    "UTC",
    "Pacific/Chatham",  # +12:45, transitions at 02:45 and 03:45 local
    "America/Santiago",  # transitions at local midnight
]
# 3 tests x 1,200 = 3,600 generated cases in the default suite (derandomized, so the same
# cases every run), x 3,500 = 10,500 with CRONWIRE_FULL=1; CRON_EXAMPLES overrides both.
# The default suite's time is work spread over four workers on two cores: these three
# tests were 60 s of it at 3,500.
EXAMPLES = int(os.environ.get(
    "CRON_EXAMPLES", "3500" if os.environ.get("CRONWIRE_FULL") == "1" else "1200"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _transitions(zone: str) -> list[datetime]:
    """UTC instants in 2025..2031 where the zone's offset changes (to the minute)."""
    tz = ZoneInfo(zone)
    found = []
    t = datetime(2025, 1, 1, tzinfo=UTC)
    prev = t.astimezone(tz).utcoffset()
    while t.year < 2032:
        nxt = t + timedelta(hours=1)
        off = nxt.astimezone(tz).utcoffset()
        if off != prev:
            m = t
            while m.astimezone(tz).utcoffset() == prev:
                m += timedelta(minutes=1)
            found.append(m)
            prev = off
        t = nxt
    return found


class _Transitions(dict[str, list[datetime]]):
    """``zone -> _transitions(zone)``, each walked on first use: seven years of hours per
    zone cost ~1 s, which every xdist worker paid at collection (four times a run) although
    one worker runs these tests."""

    def __missing__(self, zone: str) -> list[datetime]:
        self[zone] = found = _transitions(zone)
        return found


TRANSITIONS = _Transitions()


# ---------------------------------------------------------------- expressions
MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
DAYS = "SUN MON TUE WED THU FRI SAT".split()


def _pool(
    low: int, high: int, hot: list[int], star: float, names: list[str] | None = None
) -> list[str]:
    """~400 field strings of the supported grammar, built once from a fixed seed.

    Drawing one string from a pool is far cheaper than composing nested
    strategies, which is what lets 10,000+ cases run in well under a minute.
    """
    rnd = random.Random(f"{low}:{high}:{hot}")

    def value() -> int:
        return rnd.choice(hot) if rnd.random() < 0.5 else rnd.randint(low, high)

    def label(v: int) -> str:
        if names and v - low < len(names) and rnd.random() < 0.3:
            return names[v - low]
        return str(v)

    def step() -> int:
        return rnd.randint(1, max(2, (high - low) // 2))

    def item() -> str:
        kind = rnd.randrange(4)
        a, b = sorted(rnd.sample(range(low, high + 1), 2))
        if kind == 1:
            return f"{label(a)}-{label(b)}"
        if kind == 2:
            return f"{label(a)}-{label(b)}/{step()}"
        if kind == 3:
            return f"{label(value())}/{step()}"
        return label(value())

    pool: set[str] = set()
    while len(pool) < 400:
        if rnd.random() < star:
            # '*' only ever leads the field, see the module docstring
            pool.add(rnd.choice(["*", f"*/{step()}", f"*/{step()},{item()}"]))
        else:
            pool.add(",".join(item() for _ in range(rnd.randint(1, 3))))
    return sorted(pool)


HOT_MINUTES = ["0", "30", "15", "45", "59", "0,30", "*/15", "*/30", "*", "10-50/20"]
HOT_HOURS = ["0", "1", "2", "3", "1-3", "2,3", "*/2", "*", "23", "0-6/3"]
seconds_f = st.sampled_from(["0", "*", "*/10", "30", *_pool(0, 59, [0, 10, 30, 59], 0.5)])
minutes_f = st.one_of(
    st.sampled_from(HOT_MINUTES), st.sampled_from(_pool(0, 59, [0, 15, 30, 45, 59], 0.5))
)
hours_f = st.one_of(
    st.sampled_from(HOT_HOURS), st.sampled_from(_pool(0, 23, [0, 1, 2, 3, 23], 0.4))
)
dom_f = st.one_of(
    st.just("*"), st.sampled_from(["L", "1,L", *_pool(1, 31, [1, 5, 29, 30, 31], 0.2)])
)
month_f = st.one_of(st.just("*"), st.sampled_from(_pool(1, 12, [3, 4, 9, 10, 11], 0.2, MONTHS)))
dow_f = st.one_of(
    st.just("*"),
    st.sampled_from(
        [f"{d}#{n}" for d in range(8) for n in range(1, 6)] + _pool(0, 7, [0, 6, 7], 0.2, DAYS)
    ),
)


@st.composite
def cron_exprs(draw: st.DrawFn, six: bool | None = None) -> str:
    if six is None:
        six = draw(st.booleans())
    parts = [draw(minutes_f), draw(hours_f), draw(dom_f), draw(month_f), draw(dow_f)]
    if six:
        parts.insert(0, draw(seconds_f))
    expr = " ".join(parts)
    try:  # both libraries must accept it; a few day combinations never fire
        CronSim(expr, datetime(2020, 1, 1))
        parse_cron(expr)
    except (CronSimError, InvalidCron):
        reject()
    return expr


@st.composite
def starts(draw: st.DrawFn, zone: str, spread: timedelta) -> datetime:
    """An aware UTC instant near a DST transition (usually) or anywhere in 2025..2031."""
    transitions = TRANSITIONS[zone]
    if transitions and draw(st.integers(0, 3)) > 0:
        base = draw(st.sampled_from(transitions))
        secs = int(spread.total_seconds())
        return base + timedelta(seconds=draw(st.integers(-secs, secs // 4)))
    return datetime(2025, 1, 1, tzinfo=UTC) + timedelta(
        seconds=draw(st.integers(0, 7 * 365 * 86400))
    )


# -------------------------------------------------------------------- oracle
def _off(local: datetime) -> timedelta:
    offset = local.utcoffset()
    assert offset is not None
    return offset


def _is_wall_clock(expr: str) -> bool:
    fields = expr.split()
    minute, hour = (fields[1], fields[2]) if len(fields) == 6 else (fields[0], fields[1])
    return "*" not in minute and "*" not in hour


class Matcher:
    """Field matching from cronsim's parser: independent of ours."""

    def __init__(self, expr: str) -> None:
        self.sim = CronSim(expr, datetime(2000, 1, 1))

    def __call__(self, local: datetime) -> bool:
        s = self.sim
        return (
            local.second in s.seconds
            and local.minute in s.minutes
            and local.hour in s.hours
            and local.month in s.months
            and s.match_day(local.date())
        )


def brute_force(
    expr: str, zone: str, after: datetime, end: datetime,
    match: Callable[[datetime], bool] | None = None,
) -> list[datetime]:
    """The contract's rule, applied to every grid instant of (after, end]; ``match`` (a
    naive local time matches the expression), by default cronsim's fields."""
    tz, wall = ZoneInfo(zone), _is_wall_clock(expr)
    match = Matcher(expr) if match is None else match
    step = timedelta(seconds=1 if len(expr.split()) == 6 else 60)
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    u = epoch + ((after - epoch) // step + 1) * step
    prev = (u - step).astimezone(tz)
    fires = []
    while u <= end:
        local = u.astimezone(tz)
        naive = local.replace(tzinfo=None, fold=0)
        if not wall:
            fire = match(naive)
        else:
            fire = local.fold == 0 and match(naive)  # fold=1 is a second pass
            if _off(local) > _off(prev):  # u opens a gap: its skipped times fire here
                skipped = prev.replace(tzinfo=None, fold=0) + step
                while not fire and skipped < naive:
                    fire = match(skipped)
                    skipped += step
        if fire:
            fires.append(u)
        prev, u = local, u + step
    return fires


def cronsim_next(expr: str, zone: str, after: datetime, count: int) -> list[datetime]:
    it = CronSim(expr, after.astimezone(ZoneInfo(zone)))
    out: list[datetime] = []
    last = after
    try:
        for _ in range(count * 20):
            instant = next(it).astimezone(UTC)
            if instant <= after and not out:
                # cronsim may hand back a first-pass fold time that precedes
                # a start lying in the second pass; the contract wants "after".
                continue
            if instant <= last:
                break  # cronsim went backwards: it would cycle forever (see below)
            out.append(instant)
            last = instant
            if len(out) == count:
                break
    except StopIteration:
        pass
    return out


# --------------------------------------------------------------------- tests
@SETTINGS
@given(data=st.data())
def test_occurrences_equal_brute_force_walker(data: st.DataObject) -> None:
    zone = data.draw(st.sampled_from(ZONES))
    expr = data.draw(cron_exprs())
    six = len(expr.split()) == 6
    window = timedelta(minutes=12) if six else timedelta(hours=4)
    after = data.draw(starts(zone, window))
    if data.draw(st.booleans()):
        after += timedelta(microseconds=data.draw(st.integers(1, 999_999)))
    end = after + window
    got = occurrences_between(expr, zone, after, end, 100_000)
    assert got == brute_force(expr, zone, after, end), (expr, zone, after)


# cronsim's real-time path (interval schedules and every 6-field one) walks
# hours as 3600 s steps from hh:00 and builds each day's midnight with
# datetime.combine. Both go wrong around some transitions, contradicting the
# contract's "real time" (ADR 0003, "What was measured"):
# - a transition that is not a whole hour at hh:00 (Lord Howe's 30
#   minutes, Chatham's 02:45/03:45) makes it skip existing minutes of the
#   next matching hour -- or, in Chatham's fold, step back into the first
#   pass and cycle forever (cronsim_next stops when it goes backwards);
# - a gap at local midnight (Santiago) makes it fire the non-existent 00:xx.
# Where the two disagree, the test demands that the zone is one of these,
# that the schedule runs on cronsim's real-time path, that a transition is
# near, and that the brute-force walker sides with us.
CRONSIM_REAL_TIME_DEFECT_ZONES = {"Australia/Lord_Howe", "Pacific/Chatham", "America/Santiago"}


@SETTINGS
@given(data=st.data())
def test_five_field_and_interval_six_field_equal_cronsim(data: st.DataObject) -> None:
    zone = data.draw(st.sampled_from(ZONES))
    expr = data.draw(cron_exprs())
    if len(expr.split()) == 6 and _is_wall_clock(expr):
        expr = " ".join(expr.split()[1:])  # documented divergence: compare the 5-field form
    after = data.draw(starts(zone, timedelta(days=2)))
    got = next_occurrences(expr, zone, after, 8)
    theirs = cronsim_next(expr, zone, after, 8)
    if got == theirs:
        return
    event(f"known cronsim defect: {zone}")
    fixed_up = len(expr.split()) == 5 and _is_wall_clock(expr)  # cronsim's naive path
    assert zone in CRONSIM_REAL_TIME_DEFECT_ZONES and not fixed_up, (expr, zone, after, got, theirs)
    i = next((k for k, (a, b) in enumerate(zip(got, theirs, strict=False)) if a != b), len(theirs))
    assert i < len(got), (expr, zone, after, got, theirs)
    lo = got[i - 1] if i else after
    hi = got[i]  # ours is either an instant cronsim skipped or later than a bogus one of cronsim
    assert any(lo - timedelta(days=1) <= t <= hi for t in TRANSITIONS[zone]), (expr, zone, after)
    assert brute_force(expr, zone, lo, hi) == [got[i]], (expr, zone, after, got, theirs)


@SETTINGS
@given(data=st.data())
def test_next_occurrences_invariants(data: st.DataObject) -> None:
    zone = data.draw(st.sampled_from(ZONES))
    tz = ZoneInfo(zone)
    expr = data.draw(cron_exprs())
    after = data.draw(starts(zone, timedelta(days=3)))
    starts_at = after + timedelta(seconds=data.draw(st.integers(-86400, 86400)))
    ends_at = starts_at + timedelta(seconds=data.draw(st.integers(0, 40 * 86400)))
    use_starts, use_ends = data.draw(st.booleans()), data.draw(st.booleans())
    count = data.draw(st.integers(1, 30))
    got = next_occurrences(
        expr,
        zone,
        after,
        count,
        starts_at=starts_at if use_starts else None,
        ends_at=ends_at if use_ends else None,
    )
    assert len(got) <= count
    assert all(t.tzinfo is UTC for t in got)
    assert all(a < b for a, b in pairwise(got)), "strictly increasing"
    assert all(t > after for t in got)
    if use_starts:
        assert all(t >= starts_at for t in got)
    if use_ends:
        assert all(t <= ends_at for t in got)
    if not use_ends:
        assert len(got) == count, "every accepted expression fires again within decades"

    match, wall = Matcher(expr), _is_wall_clock(expr)
    for t in got:
        local = t.astimezone(tz)
        naive = local.replace(tzinfo=None, fold=0)
        if match(naive) and (not wall or local.fold == 0):
            continue
        # otherwise it must be the DST substitute: the instant a gap ends,
        # for a wall-clock schedule with a matching time inside that gap
        before = (t - timedelta(seconds=1)).astimezone(tz)
        assert wall and _off(local) > _off(before), (expr, zone, t)
        gap = _off(local) - _off(before)
        probe, hit = naive - gap, False
        while probe < naive and not hit:
            hit, probe = match(probe), probe + timedelta(seconds=1)
        assert hit, (expr, zone, t)

    if got and not use_starts:
        # windows agree with the stream, and resuming from any fire continues it
        assert occurrences_between(expr, zone, after, got[-1], 1000) == got
        k = data.draw(st.integers(0, len(got) - 1))
        assert next_occurrences(expr, zone, got[k], count)[: len(got) - k - 1] == got[k + 1 :]
