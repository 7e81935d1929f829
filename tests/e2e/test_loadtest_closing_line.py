"""`cronwire loadtest` as a user runs it: its progress line's closing state is the final
JSON's (the last progress line once said 777/s and the JSON 884.2 runs/s, the one the
sink's count over the time to the end of the drain check, the other the delivered runs
over the time to the last acknowledgement)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.servers import own_directory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_the_closing_progress_line_states_the_reports_delivered_and_rate() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    with own_directory("cronwire-loadtest-") as out:  # its Postgres lives there
        done = subprocess.run(
            [sys.executable, "-m", "cronwire.cli", "loadtest", "--scenario", "burst",
             "--schedules", "1500", "--replicas", "1", "--out", str(out)],
            env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    final = json.loads(done.stdout.strip().splitlines()[-1])
    progress = [line for line in done.stderr.splitlines() if "| delivered " in line]
    closing = progress[-1]
    delivered = re.search(r"\| delivered ([\d,]+)/([\d,]+) \|", closing)
    rate = re.search(r"\| ([\d,.]+)/s", closing)
    assert delivered and rate, closing
    assert int(delivered[1].replace(",", "")) == final["delivered"], (closing, final)
    assert int(delivered[2].replace(",", "")) == final["planned"], (closing, final)
    assert float(rate[1].replace(",", "")) == pytest.approx(final["runs_per_second"], abs=0.05), (
        closing, final)
