"""A wait that times out says what it saw: a failure under load must tell how far things got
(once, a chaos timeout that did not say how many runs had arrived)."""

from __future__ import annotations

import pytest

from cronwire.harness.sink import Sink
from cronwire.service.signals import Observed
from tests.support.polling import wait_until, wait_until_sync


async def test_wait_until_names_the_condition_its_last_value_and_the_counts() -> None:
    arrived = [1, 2, 3]

    def all_ten_arrived() -> int | None:
        return None if len(arrived) < 10 else len(arrived)

    with pytest.raises(TimeoutError) as caught:
        await wait_until(all_ten_arrived, within=0.1, every=0.01,
                         saw=lambda: f"{len(arrived)} of 10 runs arrived")
    text = str(caught.value)
    assert "all_ten_arrived not met within 0.1s" in text
    assert "last returned None" in text and "saw 3 of 10 runs arrived" in text


def test_the_sync_wait_says_the_same() -> None:
    with pytest.raises(TimeoutError, match=r"not met within 0.05s \(last returned 0\); saw 7"):
        wait_until_sync(lambda: 0, within=0.05, every=0.01, saw=lambda: 7)


async def test_a_sinks_wait_says_how_many_runs_it_had_seen() -> None:
    sink = Sink()
    sink.acknowledged.update({"a", "b"})
    with pytest.raises(TimeoutError, match="saw 2 unique runs acknowledged in 0 requests"):
        await sink.wait_for(lambda s: s.unique >= 5, within=0.05)


async def test_a_signals_wait_says_how_many_were_recorded() -> None:
    started: Observed[int] = Observed()
    started.add([1, 2])
    with pytest.raises(TimeoutError, match="2 recorded"):
        await started.wait_count(3, within=0.05)
