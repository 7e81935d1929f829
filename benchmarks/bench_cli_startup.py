"""How long the `cronwire` command takes to start, per command that needs no server.

Each command runs ``--runs`` times as a fresh process (hyperfine-style: one warm-up run
first, then the median and the fastest of the rest), with a closed loopback port as the
API and a SCHEDULER_HOME that holds no database, so every command fails fast after its
start-up and the figure is the start-up itself. Also lists the slowest imports of
``import cronwire.cli.main`` (``python -X importtime``), the cost every command pays.

Prints a table on stderr and one JSON line on stdout:

    .venv/bin/python benchmarks/bench_cli_startup.py --runs 10
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "--version": ["--version"],
    "--help": ["--help"],
    "schedules list": ["schedules", "list"],
    "runs list": ["runs", "list"],
    "tenant list": ["tenant", "list"],
    "python -c pass": None,  # the interpreter alone: the floor
}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _time_once(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=120, check=False)
    return time.perf_counter() - started


def _slowest_imports(env: dict[str, str], top: int) -> list[tuple[str, float]]:
    """(module, cumulative ms) of the slowest top-level-ish imports of the CLI module."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import cronwire.cli.main"],
                          env=env, capture_output=True, text=True, timeout=120, check=True)
    rows: list[tuple[str, float]] = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if match and len(match.group(2)) <= 5:  # the module and its direct imports
            rows.append((match.group(3), int(match.group(1)) / 1000))
    return sorted(rows, key=lambda row: -row[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command")
    args = parser.parse_args()
    cronwire = str(Path(sys.executable).with_name("cronwire"))
    with tempfile.TemporaryDirectory(prefix="cw-bench-cli-") as home:
        env = {**os.environ, "SCHEDULER_HOME": home, "XDG_RUNTIME_DIR": "/tmp",
               "CRONWIRE_URL": f"http://127.0.0.1:{_closed_port()}", "CRONWIRE_TOKEN": "cwt_x"}
        env.pop("SCHEDULER_DATABASE_URL", None)
        figures: dict[str, dict[str, float]] = {}
        for name, command in COMMANDS.items():
            argv = [sys.executable, "-c", "pass"] if command is None else [cronwire, *command]
            _time_once(argv, env)  # warm-up: page cache, .pyc files
            samples = [_time_once(argv, env) for _ in range(args.runs)]
            figures[name] = {"median_s": round(statistics.median(samples), 3),
                             "min_s": round(min(samples), 3)}
            print(f"{name:<16} median {figures[name]['median_s']:.3f} s   "
                  f"min {figures[name]['min_s']:.3f} s", file=sys.stderr)
        imports = _slowest_imports(env, 8)
    print("slowest imports of cronwire.cli.main (cumulative ms):", file=sys.stderr)
    for module, ms in imports:
        print(f"  {ms:8.1f}  {module}", file=sys.stderr)
    print(json.dumps({"runs": args.runs, "python": platform.python_version(),
                      "load_average_1m": round(os.getloadavg()[0], 2), "commands": figures,
                      "slowest_imports_ms": dict(imports)}))


if __name__ == "__main__":
    main()
