"""A clean stop of a kafka-mode replica is quiet (SIGTERM to a kafka-mode
replica that had done nothing wrong logged an ERROR, which a reader, or an alert on the
log, takes for a fault). A real `cronwire serve` (planner and executor) on the embedded
broker fires schedules every second and gets SIGTERM while they keep firing: it exits 0
and its log has no ERROR line."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

from cronwire.harness.fleet import replica_env
from cronwire.harness.processes import spawn, wait_http
from cronwire.harness.seeding import db_now, seed_firing_schedules, seed_tenant
from cronwire.harness.sink import Sink
from cronwire.loopback import free_port
from tests.support.kafka_fleet import group_stable, kafka_settings, new_topic
from tests.support.processes import cronwire_executable
from tests.support.replicas import ReplicaSet

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
SCHEDULES = 20


async def test_sigterm_to_a_firing_kafka_replica_logs_no_error(
    db_pool: asyncpg.Pool, sink: Sink, fleet: ReplicaSet, tansu_bootstrap: str
) -> None:
    replica = await fleet.spawn("a", roles="api,planner,executor", executor_workers=16,
                                **kafka_settings(tansu_bootstrap, new_topic()))
    await group_stable([replica])
    tenant = await seed_tenant(db_pool, "firing")
    now = await db_now(db_pool)
    await seed_firing_schedules(
        db_pool, tenant, SCHEDULES, cron="* * * * * *",
        target={"url": sink.url, "method": "POST", "headers": {}, "body": None},
        retry={"max_attempts": 3, "initial_backoff_seconds": 1, "max_backoff_seconds": 5},
        first=now + timedelta(seconds=1), ends_at=now + timedelta(hours=1), name="every-second-")
    await sink.wait_for(lambda s: s.unique >= 5 * SCHEDULES, within=60)
    assert await replica.stop() == 0
    errors = [line for line in replica.log().splitlines() if " ERROR " in line
              or '"level": "error"' in line]
    assert errors == [], "\n".join(errors)


async def test_ctrl_c_to_serve_with_the_embedded_broker_logs_no_error(
    database_url: str, tmp_path: Path,
) -> None:
    """What a user once saw: `SCHEDULER_CLAIM_SOURCE=kafka cronwire serve` in a terminal, then
    Ctrl-C. The terminal signals the whole foreground process group, so the embedded
    broker died with `serve` and the draining consumer logged "Failed fetch messages" and
    "Unable connect to node" as errors. The broker is `serve`'s to stop, after the drain."""
    log = tmp_path / "serve.log"
    env = replica_env(database_url, roles="api,planner,executor", claim_source="kafka",
                      home=str(tmp_path / "home"), http_port=free_port(),
                      shutdown_grace_seconds=5)
    env.pop("SCHEDULER_KAFKA_BOOTSTRAP_SERVERS", None)  # the embedded broker
    # A session of its own stands for the terminal's foreground process group.
    proc = spawn([cronwire_executable(), "serve"], env, log, preexec_fn=os.setsid)
    try:
        await wait_http(f"http://127.0.0.1:{env['SCHEDULER_HTTP_PORT']}/healthz", 60, proc,
                        what="serve", log=log)
        deadline = time.monotonic() + 60
        while "kafka partitions assigned" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
            await asyncio.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: every process of the group
        assert await asyncio.to_thread(proc.wait, 60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text(errors="replace")
    errors = [line for line in text.splitlines() if '"level": "error"' in line]
    assert errors == [], "\n".join(errors)
    assert "embedded kafka broker stopped" in text
