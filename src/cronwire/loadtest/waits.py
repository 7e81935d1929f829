"""``--statements``, second half: what each statement was doing while it ran.

pg_stat_statements gives a statement's time with its waits inside. To tell the CPU from
the waits (a commit's WAL flush, a lock, a buffer), ``pg_stat_activity`` is sampled every
SAMPLE_SECONDS from the first instant to the end of the drain on a connection of its own,
and each active backend of the load test's database counts once per sample under its
statement and what it was waiting for (or "CPU" when nothing). A sample costs the server a
fraction of a millisecond, which is why it runs only with ``--statements``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from cronwire.bootstrap.factories import harness_queries
from cronwire.loadtest.statements import production_query_names, statement_label

Q = harness_queries(Path(__file__).with_name("loadtest.sql"))
SAMPLE_SECONDS = 0.01
SHOWN = 6  # statements with the most samples
WAITS_SHOWN = 3  # per statement, besides the CPU
ON_CPU = "CPU"
# A lost connection, however asyncpg reports it: a server gone (OSError), an error from the
# server, a closed connection (InterfaceError), or a protocol left mid-operation by a
# terminated backend (InternalClientError, seen when the termination's FATAL arrived
# between two samples).
CONNECTION_LOST = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError,
                   asyncpg.InternalClientError)

log = logging.getLogger(__name__)


@dataclass
class Samples:
    taken: int = 0  # samples of pg_stat_activity
    # (statement text, "Type:Event" or ON_CPU) -> samples in which a backend was so
    seen: Counter[tuple[str, str]] = field(default_factory=Counter)


async def sample_waits(dsn: str, stop: asyncio.Event) -> Samples:
    """Sample until ``stop`` is set (none when the server could not be asked: the figures
    are a diagnosis, never a reason to fail the run)."""
    samples = Samples()
    seen = samples.seen
    try:
        conn = await asyncpg.connect(dsn)
    except CONNECTION_LOST:
        log.warning("--statements: no connection to sample pg_stat_activity", exc_info=True)
        return samples
    try:
        while not stop.is_set():
            rows = await conn.fetch(Q["loadtest_active_backends"])
            samples.taken += 1
            for row in rows:
                wait = (f"{row['wait_event_type']}:{row['wait_event']}"
                        if row["wait_event_type"] else ON_CPU)
                seen[(row["query"], wait)] += 1
            with contextlib.suppress(TimeoutError):  # the next sample is due
                await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)
    except CONNECTION_LOST:
        log.warning("--statements: sampling pg_stat_activity stopped", exc_info=True)
    finally:
        await conn.close()
    return samples


def wait_lines(samples: Samples) -> list[str]:
    """A line saying how many samples were taken, then one per statement with the most
    samples: its name, in how many samples it was active, and the share of those on the
    CPU and in each of its commonest waits."""
    names = production_query_names()
    by_statement: dict[str, Counter[str]] = {}
    for (query, wait), count in samples.seen.items():
        label = statement_label(query, names)
        by_statement.setdefault(label, Counter())[wait] += count
    ranked = sorted(by_statement.items(), key=lambda item: -sum(item[1].values()))
    lines = [f"{samples.taken:,} samples of pg_stat_activity, one every "
             f"{SAMPLE_SECONDS * 1000:.0f} ms at most; per statement, the samples it was "
             "active in"]
    for label, waits in ranked[:SHOWN]:
        total = sum(waits.values())
        shares = [f"{ON_CPU} {waits[ON_CPU] / total:.0%}"]
        shares += [f"{wait} {count / total:.0%}" for wait, count in waits.most_common()
                   if wait != ON_CPU][:WAITS_SHOWN]
        lines.append(f"{label}: {total:,} samples active, " + ", ".join(shares))
    return lines
