"""Schemathesis against the live API: `cronwire serve` (role api) as a real process on
loopback, over a real Postgres database, with a real tenant token.

Every operation of /openapi.json gets schema-valid requests (positive) and schema-breaking
ones (negative). Every response must be a non-5xx whose status, content type, headers and
body the schema declares; schema-breaking input must be refused with a 4xx; requests
without the token must be refused. Some cases use the ids of real objects (a schedule and
a run), so 200 responses are checked against the schema too, not only 404s.
"""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cronwire.adapters.embedded.postgres import free_port
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from tests.support.processes import clean_env, cronwire_executable, wait_http_ok

EXAMPLES_PER_OPERATION = 25  # per generation mode; the whole run stays well under a minute
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance, negative_data_rejection,
          ignored_auth]


@dataclass(frozen=True)
class LiveApi:
    base_url: str
    token: str
    schedule_id: str
    run_id: str


@pytest.fixture
async def tenant_token(db_pool: asyncpg.Pool) -> str:
    return (await PostgresTenantStore(db_pool).create("schemathesis")).token


@pytest.fixture
def live_api(database_url: str, tenant_token: str, tmp_path: Path) -> Iterator[LiveApi]:
    port = free_port()
    env = clean_env(SCHEDULER_DATABASE_URL=database_url, SCHEDULER_ROLES="api",
                    SCHEDULER_HTTP_PORT=str(port), SCHEDULER_ALLOW_PRIVATE_TARGETS="true",
                    SCHEDULER_HOME=str(tmp_path), SCHEDULER_DB_POOL_SIZE="4")
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([cronwire_executable(), "serve"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http_ok(f"{base}/healthz", 60, proc)  # type: ignore[arg-type]
        headers = {"Authorization": f"Bearer {tenant_token}"}
        body = {"name": "real", "cron": "0 3 * * *", "target": {"url": "http://127.0.0.1:9/"}}
        schedule = httpx.post(f"{base}/v1/schedules", json=body, headers=headers).json()
        run = httpx.post(f"{base}/v1/schedules/{schedule['id']}/trigger", headers=headers).json()
        yield LiveApi(base, tenant_token, schedule["id"], run["id"])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()[-3000:]


def _with_real_ids(case: Any, live: LiveApi, use_real: bool) -> None:
    """Point a case at the real schedule or run instead of a random id."""
    if not use_real or not case.path_parameters or "id" not in case.path_parameters:
        return
    real = live.run_id if case.operation.path.startswith("/v1/runs") else live.schedule_id
    case.path_parameters["id"] = real


def _fuzz(operation: Any, mode: GenerationMode, live: LiveApi) -> None:
    auth = {"Authorization": f"Bearer {live.token}"}

    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate],  # report, do not shrink: keep it fast
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode), use_real=st.booleans())
    def run(case: Any, use_real: bool) -> None:
        _with_real_ids(case, live, use_real)
        case.call_and_validate(base_url=live.base_url, headers=auth, checks=CHECKS, timeout=10)

    run()


def test_the_live_api_conforms_to_its_openapi_schema(live_api: LiveApi) -> None:
    schema = schemathesis.openapi.from_url(f"{live_api.base_url}/openapi.json")
    # The token is ours to send (ignored_auth separately checks requests without it), and
    # unknown query parameters are ignored by design (HTTP convention), not refused.
    schema.config.generation.with_security_parameters = False
    schema.config.generation.allow_extra_parameters = False
    operations = [result.ok() for result in schema.get_all_operations()]
    tenant_paths = sorted({op.path for op in operations if op.path.startswith("/v1")})
    assert len(tenant_paths) == 9, tenant_paths
    # DELETE last, so the real schedule lives through the other operations' cases.
    operations.sort(key=lambda op: op.method.upper() == "DELETE")
    failures: list[str] = []
    tried = 0
    for operation in operations:
        if not operation.path.startswith("/v1"):
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            tried += 1
            try:
                _fuzz(operation, mode, live_api)
            except Exception as exc:  # collect every operation's failure, then report all
                failures.append(f"{operation.method.upper()} {operation.path} [{mode.value}]:"
                                f"\n{exc}")
    assert tried == 24
    assert not failures, "\n\n".join(failures)
    # The real objects were exercised: the run still reads back as the schema says.
    detail = httpx.get(f"{live_api.base_url}/v1/runs/{live_api.run_id}",
                       headers={"Authorization": f"Bearer {live_api.token}"})
    assert detail.status_code == 200 and uuid.UUID(detail.json()["id"])
