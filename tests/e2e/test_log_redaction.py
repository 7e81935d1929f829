"""A real `cronwire serve` run that handled an API token, a signing secret, a DSN with a
password and a target header value logs none of them, writes one JSON object per line and
warns at start that private targets are allowed."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import asyncpg

from cronwire.harness.sink import Sink
from tests.support.api import schedule_body
from tests.support.processes import clean_env, cronwire_executable
from tests.support.replicas import ReplicaSet

PASSWORD = f"pw-{uuid.uuid4().hex[:12]}"
HEADER_VALUE = f"hdr-{uuid.uuid4().hex[:12]}"


def _with_user(dsn: str, user: str, password: str) -> str:
    parts = urlsplit(dsn)
    host = parts.hostname or "127.0.0.1"
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}:{parts.port}"))


async def _cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        cronwire_executable(), *args, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_real_run_logs_no_secret(
    database_url: str, db_pool: asyncpg.Pool, tmp_path: Path
) -> None:
    role = f"cw_logs_{uuid.uuid4().hex[:8]}"
    await db_pool.execute(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
    dsn = _with_user(database_url, role, PASSWORD)
    try:
        code, out, cli_log = await _cli(
            "tenant", "create", "logs", env=clean_env(SCHEDULER_DATABASE_URL=dsn,
                                                      SCHEDULER_LOG_LEVEL="debug"))
        assert code == 0, cli_log
        token = json.loads(out)["token"]
        async with Sink() as sink, ReplicaSet(dsn, log_dir=tmp_path) as fleet:
            replica = await fleet.spawn("logs", roles="api,planner,executor",
                                        log_level="debug", log_format="json",
                                        planner_lookahead_seconds=0)
            body = schedule_body(
                name="every-second", cron="* * * * * *", timezone="UTC",
                target={"url": sink.url, "method": "POST",
                        "headers": {"X-Api-Key": HEADER_VALUE}, "body": "{}"},
            )
            async with aiohttp.ClientSession(base_url=replica.base_url) as http:
                async with http.post("/v1/schedules", json=body,
                                     headers={"Authorization": f"Bearer {token}"}) as created:
                    assert created.status == 201, await created.text()
                    secret = (await created.json())["signing_secret"]
                async with http.get("/v1/schedules",
                                    headers={"Authorization": f"Bearer {token}x"}) as refused:
                    assert refused.status == 401
            await sink.wait_for(
                lambda s: any(a.headers.get("X-Api-Key") == HEADER_VALUE for a in s.arrivals),
                within=30)
            assert await replica.stop() == 0
            log = replica.log()
    finally:
        # The role made the partitions its database lacked (the keeper keeps the months
        # the retention keeps): what it owns goes with it.
        if await db_pool.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
            await db_pool.execute(f"DROP OWNED BY {role} CASCADE")
        await db_pool.execute(f"DROP ROLE IF EXISTS {role}")

    lines = [line for line in log.splitlines() if line.strip()]
    assert lines
    for line in lines:
        entry = json.loads(line)  # one object per line, nothing else on stderr/stdout
        assert {"ts", "level", "action", "message"} <= entry.keys(), line
    assert any(e["level"] == "warning" and "SCHEDULER_ALLOW_PRIVATE_TARGETS" in e["message"]
               for e in map(json.loads, lines))
    assert secret.startswith("whsec_")
    for value in (token, secret, PASSWORD, HEADER_VALUE):
        assert value not in log
        assert value not in cli_log
