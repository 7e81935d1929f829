"""Schemathesis against the live API: `cronwire serve` (role api) as a real process on
loopback, over a real Postgres database, with real tenant tokens.

Every operation of /openapi.json gets schema-valid requests (positive) and schema-breaking
ones (negative). Every response must be a non-5xx whose status, content type, headers and
body the schema declares; schema-breaking input must be refused with a 4xx; requests
without the token must be refused. Some cases use the ids of real objects (a schedule and
a run), so 200 responses are checked against the schema too, not only 404s.

The same operations are then sent with tokens that must not work: garbage, malformed,
oversized and revoked ones (401, whatever the rest of the request is), and a second
tenant's valid token aimed at the first tenant's real schedule and run (404, exactly what
an id that does not exist gets). Neither may change a row: the tables a tenant route can
write are fingerprinted before and after. The server's log must hold no traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
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

from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.loopback import free_port
from tests.support.processes import clean_env, cronwire_executable, wait_http_ok

# Per generation mode. The routes doubled this round (tokens, audit, revisions, by key,
# apply): 25 made this one test 67-76 s of the suite; 15 in the suite, 50 with
# CRONWIRE_FULL=1.
EXAMPLES_PER_OPERATION = 50 if os.environ.get("CRONWIRE_FULL") == "1" else 15
BAD_TOKEN_EXAMPLES = 6  # per operation and mode: the token is what varies
FOREIGN_EXAMPLES = 5  # per operation with an {id}
BODY_LIMIT = 262_144  # SCHEDULER_API_MAX_REQUEST_BYTES's default
# Every table a tenant route may write; their contents' digest must not move when a
# request is refused.
WRITABLE_TABLES = ("tenant", "api_token", "schedule", "job_run", "job_run_attempt",
                   "audit_event", "schedule_revision", "calendar")
# What a table's digest covers: the whole row, but a token's last_used_at (bookkeeping that
# any authenticated request may move, at most once a minute; ADR 0056).
DIGESTED = {"api_token": "(t.token_hash, t.tenant_id, t.id, t.prefix, t.scope, t.name, "
                         "t.expires_at, t.revoked_at)"}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance, negative_data_rejection,
          ignored_auth]


@dataclass(frozen=True)
class LiveApi:
    base_url: str
    token: str
    schedule_id: str
    run_id: str
    foreign_token: str  # a second tenant's token: valid, but owns nothing of the first's
    revoked_token: str  # the first tenant's, revoked before the server started
    database_url: str
    log: Path
    calendar_id: str = ""


@dataclass(frozen=True)
class Tokens:
    token: str
    foreign: str
    revoked: str


@pytest.fixture
async def tenant_tokens(db_pool: asyncpg.Pool) -> Tokens:
    store = PostgresTenantStore(db_pool)
    first = await store.create("schemathesis")
    foreign = await store.create("schemathesis-foreign")
    revoked = await store.issue_token(first.tenant_id)
    record = next(t for t in await store.list_tokens(first.tenant_id)
                  if t.prefix is not None and revoked.token.startswith(t.prefix)
                  and not first.token.startswith(t.prefix))
    await store.revoke(record.id)
    return Tokens(first.token, foreign.token, revoked.token)


@pytest.fixture
def live_api(database_url: str, tenant_tokens: Tokens, tmp_path: Path) -> Iterator[LiveApi]:
    tenant_token = tenant_tokens.token
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
        calendar = httpx.post(f"{base}/v1/calendars", headers=headers,
                              json={"name": "real", "dates": ["2030-01-01"]}).json()
        yield LiveApi(base, tenant_token, schedule["id"], run["id"], tenant_tokens.foreign,
                      tenant_tokens.revoked, database_url, tmp_path / "serve.log",
                      calendar["id"])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    log_text = (tmp_path / "serve.log").read_text()
    assert proc.returncode == 0, log_text[-3000:]
    assert "Traceback" not in log_text, log_text[-3000:]


def _schema(live: LiveApi) -> list[Any]:
    """The tenant (/v1) operations, DELETE last so the real schedule lives through the rest."""
    schema = schemathesis.openapi.from_url(f"{live.base_url}/openapi.json")
    # The token is ours to send (ignored_auth separately checks requests without it), and
    # unknown query parameters are ignored by design (HTTP convention), not refused.
    schema.config.generation.with_security_parameters = False
    schema.config.generation.allow_extra_parameters = False
    # A body over the API's limit (BODY_LIMIT) is refused before it is read: 413 with the
    # error body, a rejection like 422 (a certificate of 60,000 newlines was one).
    rejection = schema.config.checks.negative_data_rejection
    rejection.expected_statuses = [*rejection.expected_statuses, "413"]
    operations = [result.ok() for result in schema.get_all_operations()]
    operations = [op for op in operations if op.path.startswith("/v1")]
    operations.sort(key=lambda op: op.method.upper() == "DELETE")
    return operations


async def _table_digests(database_url: str) -> dict[str, tuple[int, str]]:
    conn = await asyncpg.connect(database_url)
    try:
        found = {}
        for table in WRITABLE_TABLES:
            row = await conn.fetchrow(
                f"SELECT count(*) AS n, md5(coalesce(string_agg({DIGESTED.get(table, 't')}::text,"
                f" '|' ORDER BY t::text), '')) AS digest FROM {table} t")
            found[table] = (row["n"], row["digest"])
        return found
    finally:
        await conn.close()


def table_digests(database_url: str) -> dict[str, tuple[int, str]]:
    """Row count and a digest of every row of each writable table (a sync test's view)."""
    return asyncio.run(_table_digests(database_url))


def _with_real_ids(case: Any, live: LiveApi, use_real: bool) -> None:
    """Point a case at the real schedule or run instead of a random id."""
    if not use_real or not case.path_parameters or "id" not in case.path_parameters:
        return
    path = case.operation.path
    real = live.run_id if path.startswith("/v1/runs") else (
        live.calendar_id if path.startswith("/v1/calendars") else live.schedule_id)
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


# Operations with no parameter and no body (the token aside).
WITHOUT_INPUTS = {("GET", "/v1/alerts"), ("GET", "/v1/tokens"), ("GET", "/v1/calendars")}


def test_the_live_api_conforms_to_its_openapi_schema(live_api: LiveApi) -> None:
    operations = _schema(live_api)
    tenant_paths = sorted({op.path for op in operations})
    assert len(tenant_paths) == 26, tenant_paths
    failures: list[str] = []
    tried = 0
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and \
                    (operation.method.upper(), operation.path) in WITHOUT_INPUTS:
                continue  # nothing to make invalid: Hypothesis would find no case at all
            tried += 1
            try:
                _fuzz(operation, mode, live_api)
            except Exception as exc:  # collect every operation's failure, then report all
                failures.append(f"{operation.method.upper()} {operation.path} [{mode.value}]:"
                                f"\n{exc}")
    assert tried == 69
    assert not failures, "\n\n".join(failures)
    # The real objects were exercised: the run still reads back as the schema says.
    detail = httpx.get(f"{live_api.base_url}/v1/runs/{live_api.run_id}",
                       headers={"Authorization": f"Bearer {live_api.token}"})
    assert detail.status_code == 200 and uuid.UUID(detail.json()["id"])


def _bad_tokens(live: LiveApi) -> list[str]:
    """Authorization header values that name no live token of anyone."""
    flipped = live.token[:-1] + ("A" if live.token[-1] != "A" else "B")
    return [
        f"Bearer {live.revoked_token}",  # was valid: revoked before the server started
        f"Bearer {flipped}",  # one character off a live token
        f"Bearer cwt_{uuid.uuid4().hex}",  # well-formed, never issued
        "Bearer garbage",
        "Bearer " + "x" * 10_000,  # longer than any token is allowed to be
        "Bearer \t",
        f"Basic {live.token}",  # a live token under the wrong scheme
        live.token,  # no scheme at all
        f"bearer {live.revoked_token} extra",
    ]


def _refused(operation: Any, mode: GenerationMode, live: LiveApi, tokens: list[str],
             seen: list[int]) -> None:
    @settings(max_examples=BAD_TOKEN_EXAMPLES, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode), use_real=st.booleans(),
           authorization=st.sampled_from(tokens))
    def run(case: Any, use_real: bool, authorization: str) -> None:
        _with_real_ids(case, live, use_real)
        response = case.call(base_url=live.base_url, headers={"Authorization": authorization},
                             timeout=10)
        seen.append(response.status_code)
        if response.status_code == 413 and len(json.dumps(case.body, default=str)) > BODY_LIMIT:
            return  # refused before anything is read, the token included; written: nothing
        assert response.status_code == 401, (authorization[:40], response.text[:300])
        challenge = response.headers.get("www-authenticate") or [""]
        assert challenge[0].startswith("Bearer"), response.headers

    run()


def test_every_route_refuses_a_bad_or_revoked_token_with_401_and_writes_nothing(
    live_api: LiveApi,
) -> None:
    before = table_digests(live_api.database_url)
    tokens = _bad_tokens(live_api)
    failures: list[str] = []
    seen: list[int] = []
    operations = _schema(live_api)
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and \
                    (operation.method.upper(), operation.path) in WITHOUT_INPUTS:
                continue
            try:
                _refused(operation, mode, live_api, tokens, seen)
            except Exception as exc:
                failures.append(f"{operation.method.upper()} {operation.path} [{mode.value}]:"
                                f"\n{exc}")
    assert not failures, "\n\n".join(failures)
    # every operation was sent at least once in each mode it has
    assert len(seen) >= len(operations) * 2 - len(WITHOUT_INPUTS)
    assert table_digests(live_api.database_url) == before
    # The revoked token really was one of the tenant's, and the live one still works.
    live = httpx.get(f"{live_api.base_url}/v1/schedules/{live_api.schedule_id}",
                     headers={"Authorization": f"Bearer {live_api.token}"})
    assert live.status_code == 200


def _foreign(operation: Any, live: LiveApi, statuses: list[tuple[int, int]]) -> None:
    foreign = {"Authorization": f"Bearer {live.foreign_token}"}

    @settings(max_examples=FOREIGN_EXAMPLES, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    def run(case: Any) -> None:
        _with_real_ids(case, live, True)
        real_id = case.path_parameters["id"]
        response = case.call(base_url=live.base_url, headers=foreign, timeout=10)
        # The same request for an id nobody has: a foreign object must be
        # indistinguishable from a missing one (the answer only echoes the id asked for).
        missing_id = str(uuid.uuid4())
        case.path_parameters["id"] = missing_id
        missing = case.call(base_url=live.base_url, headers=foreign, timeout=10)
        statuses.append((response.status_code, missing.status_code))
        assert response.status_code in (404, 422), response.text[:300]
        assert (response.status_code, response.text.replace(real_id, "<id>")) == (
            missing.status_code, missing.text.replace(missing_id, "<id>"))

    run()


def test_a_second_tenants_token_finds_none_of_the_first_tenants_objects(
    live_api: LiveApi,
) -> None:
    before = table_digests(live_api.database_url)
    failures: list[str] = []
    statuses: list[tuple[int, int]] = []
    by_id = [op for op in _schema(live_api) if "{id}" in op.path]
    assert len(by_id) == 19, [f"{op.method} {op.path}" for op in by_id]
    for operation in by_id:
        try:
            _foreign(operation, live_api, statuses)
        except Exception as exc:
            failures.append(f"{operation.method.upper()} {operation.path}:\n{exc}")
    assert not failures, "\n\n".join(failures)
    assert sum(1 for real, _ in statuses if real == 404) >= len(by_id)
    assert table_digests(live_api.database_url) == before
    # Lists under the foreign token are the foreign tenant's own: empty, even when
    # filtered by the first tenant's schedule id.
    foreign = {"Authorization": f"Bearer {live_api.foreign_token}"}
    base = live_api.base_url
    for url in (f"{base}/v1/schedules", f"{base}/v1/runs",
                f"{base}/v1/runs?schedule_id={live_api.schedule_id}"):
        answer = httpx.get(url, headers=foreign)
        assert (answer.status_code, answer.json()["items"]) == (200, []), url
