"""Token scopes (ADR 0056): every /v1 operation of the OpenAPI document, called with a
token of every scope, answers 403 exactly when the token's scope is below the one the
operation declares, and the declared scope is the CONTRACT's rule. A new route without a
scope decision has no scope in its security requirement and fails here by name."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.api.context import ApiContext
from cronwire.domain.access import MAX_LIVE_TOKENS, Scope
from tests.support.api import api_context, asgi_client, schedule_body

RANK = {"read": 0, "write": 1, "admin": 2}
ADMIN_PATHS = ("/v1/tokens", "/v1/audit")


def contract_scope(method: str, path: str) -> str:
    """CONTRACT "Tokens, audit and revisions": read every GET; write every change to
    schedules and runs; admin tokens, the alert destination and the audit log."""
    if path.startswith(ADMIN_PATHS) or (path == "/v1/alerts" and method != "GET"):
        return "admin"
    return "read" if method == "GET" else "write"


async def _operations(client: httpx.AsyncClient) -> list[tuple[str, str, list[str]]]:
    spec = (await client.get("/openapi.json")).json()
    found = []
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if path.startswith("/v1/") or path == "/v1":
                requirements = operation.get("security") or [{}]
                scopes = [s for req in requirements for s in req.get("HTTPBearer", [])]
                found.append((method.upper(), path, scopes))
    return sorted(found)


def _filled(path: str) -> str:
    return path.replace("{id}", str(uuid.uuid4())).replace("{version}", "1")


@pytest.fixture
async def scoped(db_pool: asyncpg.Pool) -> AsyncIterator[tuple[httpx.AsyncClient, ApiContext,
                                                              dict[str, str], PostgresTenantStore]]:
    ctx = api_context(db_pool)
    tenants = PostgresTenantStore(db_pool)
    created = await tenants.create("scopes")
    tokens = {scope.value: (await tenants.issue_token(created.tenant_id, scope=scope,
                                                      name=f"{scope}-token")).token
              for scope in Scope}
    async with asgi_client(ctx) as client:
        yield client, ctx, tokens, tenants


async def test_every_operation_declares_the_contracts_scope_and_enforces_it(scoped: Any) -> None:
    client, _ctx, tokens, _tenants = scoped
    operations = await _operations(client)
    assert len(operations) >= 25, operations  # the walk sees every tenant route
    undecided = [f"{m} {p}" for m, p, scopes in operations if len(scopes) != 1]
    assert not undecided, f"operations without exactly one scope: {undecided}"
    wrong = [f"{m} {p}: {s[0]} (CONTRACT: {contract_scope(m, p)})"
             for m, p, s in operations if s[0] != contract_scope(m, p)]
    assert not wrong, wrong
    failures = []
    for method, path, (needed,) in operations:
        for held, token in tokens.items():
            response = await client.request(method, _filled(path), json={} if method in {
                "POST", "PUT", "PATCH"} else None, headers={"Authorization": f"Bearer {token}"})
            refused = response.status_code == 403
            if refused != (RANK[held] < RANK[needed]):
                failures.append(f"{method} {path} with {held}: {response.status_code} "
                                f"{response.text[:120]}")
            elif refused:
                assert f"scope {needed}" in response.json()["error"]["message"], response.text
    assert not failures, "\n".join(failures)


async def test_a_read_token_reads_and_cannot_write(scoped: Any) -> None:
    client, _ctx, tokens, _tenants = scoped
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    read = {"Authorization": f"Bearer {tokens['read']}"}
    created = await client.post("/v1/schedules", json=schedule_body(), headers=admin)
    assert created.status_code == 201, created.text
    path = f"/v1/schedules/{created.json()['id']}"
    assert (await client.get(path, headers=read)).status_code == 200
    refused = await client.patch(path, json={"name": "x"}, headers=read)
    assert refused.status_code == 403
    assert refused.json()["error"] == {
        "code": "forbidden", "field": "scope", "limit": None,
        "message": "scope: this request needs a token of scope write (this one is read)"}
    # a malformed body does not get past the scope check either
    bad = await client.post("/v1/schedules", content=b"{", headers={
        **read, "Content-Type": "application/json"})
    assert bad.status_code == 403


async def test_another_tenants_object_is_404_for_every_scope(scoped: Any) -> None:
    client, _ctx, tokens, tenants = scoped
    other = await tenants.create("other")
    theirs = await client.post("/v1/schedules", json=schedule_body(),
                               headers={"Authorization": f"Bearer {other.token}"})
    path = f"/v1/schedules/{theirs.json()['id']}"
    for token in tokens.values():
        headers = {"Authorization": f"Bearer {token}"}
        assert (await client.get(path, headers=headers)).status_code == 404
    write = {"Authorization": f"Bearer {tokens['write']}"}
    assert (await client.delete(path, headers=write)).status_code == 404


async def test_a_token_expires_at_the_second(scoped: Any, db_pool: asyncpg.Pool) -> None:
    client, _ctx, _tokens, tenants = scoped
    created = await tenants.create("expiring")
    issued = await tenants.issue_token(created.tenant_id, scope=Scope.READ, name="short",
                                       expires_in=timedelta(seconds=3))
    assert issued.record is not None and issued.record.expires_at is not None
    expires_at = issued.record.expires_at
    headers = {"Authorization": f"Bearer {issued.token}"}
    # just before the second it expires at, it works ...
    await _sleep_until(db_pool, expires_at - timedelta(milliseconds=900))
    before = await client.get("/v1/schedules", headers=headers)
    assert await db_pool.fetchval("SELECT now() < $1", expires_at)  # still before it
    assert before.status_code == 200, before.text
    # ... and from that instant on it answers 401 saying it expired
    await _sleep_until(db_pool, expires_at)
    after = await client.get("/v1/schedules", headers=headers)
    assert after.status_code == 401
    assert "expired" in after.json()["error"]["message"]
    assert after.headers["WWW-Authenticate"].startswith("Bearer")


async def _sleep_until(pool: asyncpg.Pool, instant: Any) -> None:
    left = await pool.fetchval("SELECT extract(epoch FROM $1::timestamptz - clock_timestamp())",
                               instant)
    if left > 0:
        await asyncio.sleep(float(left))


async def test_an_expires_at_in_the_past_is_refused(scoped: Any) -> None:
    client, _ctx, tokens, _tenants = scoped
    response = await client.post("/v1/tokens", json={
        "name": "late", "scope": "read", "expires_at": "2001-01-01T00:00:00Z"},
        headers={"Authorization": f"Bearer {tokens['admin']}"})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "expires_at"


async def test_tokens_issue_list_revoke_over_the_api(scoped: Any) -> None:
    client, _ctx, tokens, _tenants = scoped
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    made = await client.post("/v1/tokens", json={"name": "ci", "scope": "write"}, headers=admin)
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["scope"] == "write" and body["name"] == "ci" and body["token"].startswith("cwt_")
    listed = (await client.get("/v1/tokens", headers=admin)).json()["items"]
    assert body["id"] in {t["id"] for t in listed}
    assert all("token" not in t for t in listed)
    new = {"Authorization": f"Bearer {body['token']}"}
    assert (await client.get("/v1/schedules", headers=new)).status_code == 200
    assert (await client.delete(f"/v1/tokens/{body['id']}", headers=admin)).status_code == 204
    assert (await client.get("/v1/schedules", headers=new)).status_code == 401
    assert (await client.delete(f"/v1/tokens/{uuid.uuid4()}", headers=admin)).status_code == 404


async def test_last_used_at_is_written_at_most_once_a_minute(
    scoped: Any, db_pool: asyncpg.Pool,
) -> None:
    client, ctx, tokens, _tenants = scoped
    headers = {"Authorization": f"Bearer {tokens['read']}"}
    token_id = await db_pool.fetchval("SELECT id FROM api_token WHERE name = 'read-token'")
    for _ in range(20):
        assert (await client.get("/v1/schedules", headers=headers)).status_code == 200
    await ctx.tokens.last_used.drain()  # type: ignore[attr-defined]
    first = await db_pool.fetchval("SELECT last_used_at FROM api_token WHERE id = $1", token_id)
    assert first is not None
    assert ctx.tokens.last_used.written == 1  # type: ignore[attr-defined]  # one batch, one token
    # Another replica (a second store) within the minute: the conditional UPDATE keeps it.
    other = api_context(db_pool)
    async with asgi_client(other) as second:
        assert (await second.get("/v1/schedules", headers=headers)).status_code == 200
    await other.tokens.last_used.drain()  # type: ignore[attr-defined]
    again = await db_pool.fetchval("SELECT last_used_at FROM api_token WHERE id = $1", token_id)
    assert again == first


async def test_live_tokens_are_capped_per_tenant(scoped: Any, db_pool: asyncpg.Pool) -> None:
    client, _ctx, tokens, _tenants = scoped
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    live = await db_pool.fetchval("SELECT count(*) FROM api_token WHERE revoked_at IS NULL "
                                  "AND tenant_id = (SELECT tenant_id FROM api_token "
                                  "WHERE name = 'admin-token')")
    for i in range(MAX_LIVE_TOKENS - live):
        made = await client.post("/v1/tokens", json={"name": f"t{i}", "scope": "read"},
                                 headers=admin)
        assert made.status_code == 201, made.text
    refused = await client.post("/v1/tokens", json={"name": "one-more", "scope": "read"},
                                headers=admin)
    assert refused.status_code == 429 and refused.json()["error"]["limit"] == "max_tokens"
    listed = (await client.get("/v1/tokens", headers=admin)).json()["items"]
    assert len(listed) == MAX_LIVE_TOKENS
