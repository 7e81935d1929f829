"""`cronwire apply` of N schedules from the CLI (ADR 0057): the first apply
creates them, the second (the figure) finds them all unchanged and writes nothing. Each is
timed as a user runs it: a fresh `python -m cronwire apply` process reading a YAML file,
against a real `cronwire serve` (api role) on a throwaway Postgres. Every schedule has a
sealed header, so the comparison opens N sealed values. Prints one JSON line.

    python benchmarks/bench_apply_unchanged.py [--schedules 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from cronwire.adapters.embedded.postgres import throwaway_cluster
from cronwire.harness.fleet import HARNESS_SECRET_KEYS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(env: dict[str, str], *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "cronwire.cli", *args], env=env, text=True,
                          capture_output=True, check=False)
    if done.returncode not in (0, 3):
        raise SystemExit(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return time.perf_counter() - started, done


def _wait_ready(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("the server did not get ready")


def run(count: int, dsn: str, work: Path) -> dict[str, object]:
    port = _free_port()
    env = {**os.environ, "SCHEDULER_DATABASE_URL": dsn, "SCHEDULER_HTTP_PORT": str(port),
           "SCHEDULER_ROLES": "api", "SCHEDULER_ALLOW_PRIVATE_TARGETS": "true",
           "SCHEDULER_SECRET_KEYS": HARNESS_SECRET_KEYS, "SCHEDULER_LOG_LEVEL": "warning",
           "SCHEDULER_API_RATE_PER_SECOND": "1000"}
    subprocess.run([sys.executable, "-m", "cronwire.cli", "migrate"], env=env, check=True)
    server = subprocess.Popen([sys.executable, "-m", "cronwire.cli", "serve"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/readyz", time.monotonic() + 60)
        _, made = _cli(env, "tenant", "create", "bench")
        client = {**env, "CRONWIRE_URL": f"http://127.0.0.1:{port}",
                  "CRONWIRE_TOKEN": json.loads(made.stdout)["token"]}
        path = work / "schedules.yaml"
        path.write_text(yaml.safe_dump([
            {"key": f"job-{i:05d}", "name": f"job {i}", "cron": f"{i % 60} * * * *",
             "timezone": "Europe/Berlin",
             "target": {"url": f"http://127.0.0.1:9/hook/{i}",
                        "headers": {"authorization": "Bearer ${BENCH_TOKEN}"}},
             "retry": {"max_attempts": 5}} for i in range(count)]))
        client["BENCH_TOKEN"] = "s3cret"
        flags = ["-f", str(path), "--managed-by", "bench", "--json", "--timeout", "600"]
        create_s, created = _cli(client, "apply", *flags)
        again_s, again = _cli(client, "apply", *flags)
        plan_s, plan = _cli(client, "plan", *flags)
        answer = json.loads(again.stdout)
        changes = len(answer["created"]) + len(answer["updated"]) + len(answer["deleted"])
        return {"schedules": count, "first_apply_seconds": round(create_s, 2),
                "created": len(json.loads(created.stdout)["created"]),
                "unchanged_apply_seconds": round(again_s, 2),
                "unchanged": answer["unchanged"], "changes": changes,
                "plan_seconds": round(plan_s, 2), "plan_exit": plan.returncode,
                "file_bytes": path.stat().st_size}
    finally:
        server.terminate()
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    args = parser.parse_args()
    with throwaway_cluster("cronwire-apply-") as server, \
            tempfile.TemporaryDirectory() as work:
        report = run(args.schedules, server.dsn, Path(work))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
