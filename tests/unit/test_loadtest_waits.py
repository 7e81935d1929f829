"""``--statements``' wait lines (loadtest/waits.wait_lines): each statement named as
pg_stat_statements' lines name it, with its share on the CPU and in each wait; and the
sampler ending on a connection lost however asyncpg reports it (the real server's case
is tests/integration/test_loadtest_waits_sampler.py)."""

from __future__ import annotations

import asyncio
from collections import Counter

import asyncpg
import pytest

from cronwire.bootstrap.factories import production_queries
from cronwire.loadtest.waits import ON_CPU, Samples, sample_waits, wait_lines


def test_statements_are_named_and_split_between_the_cpu_and_their_waits() -> None:
    claim = production_queries()["job_run_claim"]
    resolve = production_queries()["job_run_resolve"]
    samples = Samples(taken=1000, seen=Counter({
        (claim, ON_CPU): 90, (claim, "IO:WalSync"): 25, (claim, "LWLock:WALWrite"): 10,
        (claim, "LWLock:BufferContent"): 3, (claim, "Lock:transactionid"): 2,
        (resolve, ON_CPU): 40, (resolve, "IO:WalSync"): 10,
        ("-- the harness's count\nSELECT   count(*)\n FROM   job_run", ON_CPU): 1,
    }))
    assert wait_lines(samples) == [
        "1,000 samples of pg_stat_activity, one every 10 ms at most; per statement, the "
        "samples it was active in",
        # the fourth wait and beyond are left out
        "job_run_claim: 130 samples active, CPU 69%, IO:WalSync 19%, LWLock:WALWrite 8%, "
        "LWLock:BufferContent 2%",
        "job_run_resolve: 50 samples active, CPU 80%, IO:WalSync 20%",
        "SELECT count(*) FROM job_run: 1 samples active, CPU 100%",
    ]


def test_with_nothing_seen_only_the_count_of_samples_is_said() -> None:
    assert wait_lines(Samples(taken=12)) == [
        "12 samples of pg_stat_activity, one every 10 ms at most; per statement, the samples "
        "it was active in"]


class _Terminated:
    """A connection whose backend was terminated between two samples: asyncpg found its
    protocol mid-operation (InternalClientError, as in a CI run of the integration test
    test_loadtest_waits_sampler.py, where the FATAL came between two samples)."""

    def __init__(self) -> None:
        self.fetches = 0
        self.closed = False

    async def fetch(self, _query: str) -> list[dict[str, str | None]]:
        self.fetches += 1
        if self.fetches > 2:
            raise asyncpg.InternalClientError(
                "cannot switch to state 12; another operation (2) is in progress")
        return [{"query": "SELECT 1", "wait_event_type": None, "wait_event": None}]

    async def close(self) -> None:
        self.closed = True


def test_a_connection_lost_mid_operation_ends_the_sampling_with_what_was_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    conn = _Terminated()

    async def connect(_dsn: str) -> _Terminated:
        return conn

    monkeypatch.setattr(asyncpg, "connect", connect)
    samples = asyncio.run(sample_waits("postgresql://unused", asyncio.Event()))
    assert samples.taken == 2 and samples.seen == Counter({("SELECT 1", ON_CPU): 2})
    assert conn.closed
