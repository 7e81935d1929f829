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


def test_the_rate_covers_the_time_since_the_last_line_and_the_last_line_the_reports(
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
    progress.done(1_600, 400.0, 3_210.0)
    lines = capsys.readouterr().err.strip().splitlines()
    # Lines at 1000.25 and 1005.25: 1,600 runs in the 5 s between them.
    assert _rates("\n".join(lines[:2])) == ["0/s", "320/s"]
    # The closing line is the report's figures, named as such (it once was the sink's
    # count over the time to the end of the drain check, "194/s", beside a report of 400).
    assert lines[-1] == ("[loadtest] done | delivered 1,600/2,000 | 400.0/s, first instant "
                         "to the last acknowledgement (report.json's runs_per_second) | "
                         "lag p99 3.21s")
