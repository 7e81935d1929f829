"""The CPU a ``cronwire serve`` replica spends from ``exec`` to its first healthy
``/healthz``, per role set, against one migrated database (docs/operating.md#start-up).

Each start is a fresh process of the harness fleet (the one the tests and ``cronwire
chaos`` use), read from ``/proc/<pid>/stat`` once it answers, then stopped. With
``--against SRC`` (another checkout's ``src`` directory, put first on the replicas'
``PYTHONPATH``) the two builds start in turn, so both see the same hour of the machine.
Prints one JSON line per build and role set: the median and every start.

    .venv/bin/python benchmarks/bench_replica_start.py [--starts 8] [--against ../base/src]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from cronwire.adapters.embedded.postgres import run_on_database
from cronwire.bootstrap.factories import fresh_database
from cronwire.harness.fleet import Fleet, replica_env
from cronwire.harness.stats import cpu_seconds

ROLE_SETS = ("executor", "api,planner,executor")
THIS_TREE = str(Path(__file__).resolve().parents[1] / "src")


async def measure(admin_dsn: str, starts: int, trees: list[str]) -> None:
    dsn = await fresh_database(admin_dsn, "replica_start")
    seconds: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as logs:
        async with Fleet(Path(logs)) as fleet:
            for start in range(starts):
                for tree in trees:
                    for roles in ROLE_SETS:
                        env = replica_env(dsn, roles=roles) | {"PYTHONPATH": tree}
                        replica = await fleet.launch(f"{roles.replace(',', '-')}-{start}", env)
                        used = cpu_seconds([replica.pid])
                        assert used is not None, "no /proc here"
                        seconds.setdefault((tree, roles), []).append(used)
                        await replica.stop()
    for (tree, roles), values in seconds.items():
        print(json.dumps({"src": tree, "roles": roles,
                          "median_cpu_seconds": round(statistics.median(values), 3),
                          "starts": [round(value, 2) for value in values]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--against", help="another checkout's src directory, interleaved")
    parser.add_argument("--dsn", help="a server to make the database on (default: embedded)")
    args = parser.parse_args()
    trees = [str(Path(args.against).resolve()), THIS_TREE] if args.against else [THIS_TREE]
    run_on_database(args.dsn, lambda admin: measure(admin, args.starts, trees))


if __name__ == "__main__":
    main()
