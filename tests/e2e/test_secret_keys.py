"""The key ring from the operator's side (ADR 0061), as real processes: `serve`
on a database of its own refuses to start without a key or with one that does not open the
stored data keys (exit 2, one line naming SCHEDULER_SECRET_KEYS, nothing delivered), the
embedded dev mode generates one key file (0600) once, and `keys status` / `keys rotate`
re-wrap every data key so the old key can leave the configuration."""

from __future__ import annotations

import base64
import json
import logging
import stat
import uuid
from pathlib import Path

import asyncpg
import pytest

from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.bootstrap.secret_keys import SECRET_KEYS_FILE_NAME, with_key_ring
from cronwire.config import Settings, load_settings
from cronwire.domain.errors import ConfigError
from cronwire.domain.model import Target
from cronwire.domain.schedules import ScheduleSpec
from cronwire.harness.fleet import HARNESS_SECRET_KEYS
from cronwire.harness.seeding import SeededSchedule, seed_due_runs, seed_tenant
from cronwire.loopback import free_port
from tests.support.processes import clean_env, run_cli
from tests.support.secrets import secret_box

NEW_KEY = "next:" + base64.b64encode(b"\x5a" * 32).decode()


async def _a_sealed_schedule(pool: asyncpg.Pool, *, due_run: bool = False) -> None:
    tenant = await seed_tenant(pool)
    spec = ScheduleSpec(name="s", cron="0 3 * * *", timezone="UTC",
                        target=Target("http://127.0.0.1:9/", headers={"Authorization": "x"}))
    created = await PostgresScheduleStore(pool, secret_box(pool)).create(
        tenant, spec, paused=not due_run, signing_secret="whsec_" + "A" * 32, max_schedules=10)
    if due_run:  # what a replica that started would deliver, signed
        await seed_due_runs(pool, SeededSchedule(created.id, tenant, "", ""), 1)


def _serve_env(dsn: str, **more: str) -> dict[str, str]:
    return clean_env(SCHEDULER_DATABASE_URL=dsn, SCHEDULER_HTTP_PORT=str(free_port()),
                     SCHEDULER_SHUTDOWN_GRACE_SECONDS="1", **more)


def _one_line(result_stderr: str) -> str:
    lines = [line for line in result_stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in result_stderr
    return lines[-1]


async def test_serve_on_its_own_database_without_a_key_exits_2_naming_it(
        db_pool: asyncpg.Pool, database_url: str) -> None:
    result = run_cli("serve", env=_serve_env(database_url, SCHEDULER_SECRET_KEYS=""))
    assert result.returncode == 2, result.stderr
    assert "SCHEDULER_SECRET_KEYS" in _one_line(result.stderr)


async def test_serve_with_a_key_ring_that_does_not_open_the_data_keys_exits_2(
        db_pool: asyncpg.Pool, database_url: str) -> None:
    await _a_sealed_schedule(db_pool, due_run=True)
    key_id = HARNESS_SECRET_KEYS.partition(":")[0]
    wrong = f"{key_id}:" + base64.b64encode(b"\x01" * 32).decode()
    result = run_cli("serve", env=_serve_env(database_url, SCHEDULER_SECRET_KEYS=wrong))
    assert result.returncode == 2, result.stderr
    line = _one_line(result.stderr)
    assert "SCHEDULER_SECRET_KEYS" in line and "does not open" in line
    assert await db_pool.fetchval("SELECT count(*) FROM run_attempt") == 0
    assert await db_pool.fetchval("SELECT status FROM job_run") == "pending"  # not signed


async def test_keys_rotate_rewraps_every_data_key_and_the_old_key_can_go(
        db_pool: asyncpg.Pool, database_url: str) -> None:
    for _ in range(3):
        await _a_sealed_schedule(db_pool)
    old_id = HARNESS_SECRET_KEYS.partition(":")[0]
    env = clean_env(SCHEDULER_DATABASE_URL=database_url)
    status = run_cli("keys", "status", env=env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["data_keys_by_key_id"] == {old_id: 3}
    both = clean_env(SCHEDULER_DATABASE_URL=database_url,
                     SCHEDULER_SECRET_KEYS=f"{NEW_KEY},{HARNESS_SECRET_KEYS}")
    rotated = json.loads(run_cli("keys", "rotate", env=both).stdout)
    assert rotated["rewrapped"] == 3 and rotated["data_keys_by_key_id"] == {"next": 3}
    assert json.loads(run_cli("keys", "rotate", env=both).stdout)["rewrapped"] == 0
    only_new = clean_env(SCHEDULER_DATABASE_URL=database_url, SCHEDULER_SECRET_KEYS=NEW_KEY)
    after = run_cli("keys", "status", env=only_new)
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["data_keys_by_key_id"] == {"next": 3}
    old_only = run_cli("keys", "status", env=env)
    assert old_only.returncode == 2 and "SCHEDULER_SECRET_KEYS" in _one_line(old_only.stderr)


def test_the_embedded_database_generates_one_key_file_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings({"SCHEDULER_HOME": str(tmp_path)})
    assert settings.embedded_database and not settings.secret_keys
    with caplog.at_level(logging.INFO, logger="cronwire"):
        first = with_key_ring(settings)
        second = with_key_ring(settings)
    path = tmp_path / SECRET_KEYS_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert first.secret_keys == second.secret_keys and len(first.secret_keys[0][1]) == 32
    said = [r.getMessage() for r in caplog.records if "generated a secret key ring" in r.getMessage()]
    assert len(said) == 1 and str(path) in said[0]
    with pytest.raises(ConfigError, match="SCHEDULER_SECRET_KEYS"):
        with_key_ring(Settings(database_url="postgresql://u@127.0.0.1:9/db"))


def test_a_malformed_key_ring_names_the_variable_and_never_the_key() -> None:
    secret = base64.b64encode(b"\x07" * 16).decode()
    with pytest.raises(ConfigError) as short:
        load_settings({"SCHEDULER_SECRET_KEYS": f"k1:{secret}"})
    assert "SCHEDULER_SECRET_KEYS" in str(short.value) and secret not in str(short.value)
    with pytest.raises(ConfigError, match="SCHEDULER_SECRET_KEYS"):
        load_settings({"SCHEDULER_SECRET_KEYS": f"k1:{uuid.uuid4()}"})
    with pytest.raises(ConfigError, match="appears twice"):
        load_settings({"SCHEDULER_SECRET_KEYS": f"{HARNESS_SECRET_KEYS},{HARNESS_SECRET_KEYS}"})
