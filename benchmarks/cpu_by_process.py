"""The CPU every kind of process used while a command ran (docs/testing.md): each process's
utime + stime read from ``/proc`` twice a second, grouped by what its command line says it
is (the pytest workers, ``cronwire serve``, Postgres, the Kafka JVMs, chromium ...).

Processes older than the command count only the CPU they used during it; processes that
live less than one sample interval are missed. Prints one JSON object when the command ends.

    python benchmarks/cpu_by_process.py -- python -m pytest
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import threading
import time

HZ = os.sysconf("SC_CLK_TCK")
KINDS = (  # the first match names the kind
    ("java", "kafka (java)"), ("postgres", "postgres"), ("tansu", "tansu"),
    ("chrom", "chromium"), ("cronwire serve", "cronwire serve"), ("cronwire", "cronwire other"),
    ("nginx", "nginx"), ("pytest", "pytest controller"), ("python", "python (pytest workers)"),
)


def kind_of(command: str) -> str:
    for needle, kind in KINDS:
        if needle in command:
            return kind
    return "other"


def sample(seen: dict[tuple[str, str], list[float | str]], first: bool) -> None:
    own = str(os.getpid())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if pid == own:
            continue
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone between the listing and the read
            continue
        cpu = (int(fields[11]) + int(fields[12])) / HZ
        key = (pid, fields[19])  # a pid and its start time name one process
        if key in seen:
            seen[key][2] = cpu
        else:  # an older process counts from the first sample, a new one from zero
            seen[key] = [kind_of(command) if command else "kernel", cpu if first else 0.0, cpu]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name a command after --")
    seen: dict[tuple[str, str], list[float | str]] = {}
    sample(seen, first=True)
    done = threading.Event()
    started = time.monotonic()

    def poll() -> None:
        while not done.wait(args.every):
            sample(seen, first=False)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    exit_code = subprocess.call(command)
    done.set()
    poller.join()
    sample(seen, first=False)
    totals: dict[str, float] = {}
    for kind, first_cpu, last_cpu in seen.values():
        totals[str(kind)] = totals.get(str(kind), 0.0) + float(last_cpu) - float(first_cpu)
    print(json.dumps({"seconds": round(time.monotonic() - started, 1), "exit_code": exit_code,
                      "cpu_seconds": {kind: round(cpu, 1) for kind, cpu in
                                      sorted(totals.items(), key=lambda kv: -kv[1])}}))
    raise SystemExit(exit_code)


if __name__ == "__main__":
    main()
