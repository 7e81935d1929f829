"""The harnesses' figures: percentiles of lags, and CPU seconds used by processes (Linux
/proc). Per-run CPU is a comparison that a shared machine disturbs far less than runs/s,
which also measure everyone else's load."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path


def percentile(values: Iterable[float], fraction: float) -> float:
    """The value at ``fraction`` (0..1) of the sorted values, by the nearest index
    (``round(fraction * (n - 1))``); 0.0 when there are none."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


@functools.lru_cache(maxsize=4096)
def instant_seconds(text: str) -> float | None:
    """An ISO 8601 instant (a delivery's ``x-cronwire-scheduled-for``) as epoch seconds;
    None if it is not one. Cached: every run of one occurrence shares its instant."""
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def cpu_seconds(pids: Iterable[int]) -> float | None:
    """User + system CPU of ``pids`` so far; None where /proc cannot tell."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    try:
        for pid in pids:
            # the command name (field 2) may hold spaces: split after its closing paren
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    except (OSError, ValueError, IndexError):
        return None
    return total / ticks


def child_pids(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (nginx's workers, Postgres's backends),
    from /proc."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1] == str(parent):
            children.append(int(entry.name))
    return children


def server_cpu_seconds(root_pid: int) -> float | None:
    """CPU a server's whole process tree has used so far: its root's own and its reaped
    children's (cutime, cstime: Postgres backends that came and went) plus the children
    still running. Continuous as children exit (their time moves into the root's
    cutime/cstime at reaping). None where /proc cannot tell."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        fields = Path(f"/proc/{root_pid}/stat").read_text().rpartition(")")[2].split()
        total = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    except (OSError, ValueError, IndexError):
        return None
    for pid in child_pids(root_pid):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            continue  # a child that exited meanwhile is in the root's cutime by now
    return total / ticks


# /proc/stat's first line, after "cpu": user nice system idle iowait irq softirq steal ...
# Busy is everything but idle and iowait (guest time is inside user already).
_IDLE_FIELDS = (3, 4)
_COUNTED_FIELDS = 8


def busy_cpu_seconds(proc_stat: str) -> float | None:
    """CPU seconds the whole machine has been busy since boot, every process and the
    kernel's own work (interrupts) together, from the text of /proc/stat; None when the
    text has no ``cpu`` line."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for line in proc_stat.splitlines():
        fields = line.split()
        if fields[:1] != ["cpu"]:
            continue
        try:
            counts = [int(value) for value in fields[1:1 + _COUNTED_FIELDS]]
        except ValueError:
            return None
        return sum(c for i, c in enumerate(counts) if i not in _IDLE_FIELDS) / ticks
    return None


def machine_busy_seconds() -> float | None:
    """:func:`busy_cpu_seconds` of this machine now; None where /proc cannot tell."""
    try:
        return busy_cpu_seconds(Path("/proc/stat").read_text())
    except OSError:
        return None


def per_run_us(before: float | None, after: float | None, runs: int) -> float | None:
    if before is None or after is None or runs <= 0:
        return None
    return round((after - before) / runs * 1e6, 1)
