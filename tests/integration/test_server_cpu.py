"""The load test's Postgres CPU figure: a server's whole process tree, children that came
and went included (real processes; Postgres forks a backend per connection)."""

from __future__ import annotations

import subprocess
import sys

from cronwire.harness.stats import server_cpu_seconds

# A parent that forks three children one after another, each burning ~0.3 s of CPU and
# exiting (reaped by the parent's wait), then prints and sleeps until killed.
PARENT = """
import os, sys, time
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
print("done", flush=True)
time.sleep(60)
"""


def test_children_that_exited_are_counted_through_their_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "done"
        used = server_cpu_seconds(parent.pid)
        assert used is not None
        assert used >= 0.8  # three children's ~0.9 s, though none of them runs any more
    finally:
        parent.kill()
        parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_running_child_is_counted_while_it_runs() -> None:
    code = ("import os, time\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    end = time.process_time() + 0.4\n"
            "    while time.process_time() < end: pass\n"
            "    print('burnt', flush=True)\n"
            "    time.sleep(60)\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "burnt"
        used = server_cpu_seconds(parent.pid)
        assert used is not None and used >= 0.35
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(parent.pid)], check=False)
        parent.kill()
        parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_process_that_is_gone_tells_nothing() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=10)
    assert server_cpu_seconds(gone.pid) is None
