"""``--statements``' wait lines (loadtest/waits.wait_lines): each statement named as
pg_stat_statements' lines name it, with its share on the CPU and in each wait."""

from __future__ import annotations

from collections import Counter

from cronwire.bootstrap.factories import production_queries
from cronwire.loadtest.waits import ON_CPU, Samples, wait_lines


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
