"""The load test's progress line on a clock of the test's own (no sleeping)."""

from __future__ import annotations

import pytest

from cronwire.loadtest.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _rates(lines: str) -> list[str]:
    return [line.split(" | ")[2] for line in lines.strip().splitlines()]


def test_the_rate_covers_the_time_since_the_last_line_and_the_last_line_the_average(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = Clock()
    first = clock.now + 1
    progress = Progress([first, first + 9], 1000, every=5.0, tty=False, wall=clock,
                        monotonic=clock)
    delivered = 0.0
    for _ in range(37):  # sampled every 0.25 s, as watch() does, until 1009.25
        clock.now += 0.25
        if first < clock.now <= first + 4:
            delivered += 100  # 400 runs/s for the first 4 s after the first fire, then none
        progress.show({"unique": delivered})
    progress.done({"unique": delivered})
    rates = _rates(capsys.readouterr().err)
    # Lines at 1000.25 and 1005.25: 1,600 runs in the 5 s between them.
    assert rates[:2] == ["0/s", "320/s"]
    # The last samples saw nothing new; the closing line is 1,600 runs over the 8.25 s
    # since the first fire, not the last quarter second's "0/s".
    assert rates[2:] == ["194/s on average since the first fire"]
