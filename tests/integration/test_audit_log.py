"""The audit log (ADR 0056): one row per change, written in the change's own transaction,
with the actor, the request id, the client address and a field-by-field diff whose sealed
values read "***"; GET /v1/audit pages it newest first with filters. A change whose
connection dies before its commit leaves neither the change nor its audit row."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

import asyncpg

from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.domain.access import Actor, Change
from cronwire.domain.errors import StorageError
from tests.support.api import Api, api_fixture, schedule_body  # noqa: F401 - fixture
from tests.support.secrets import secret_box


async def _audit(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> list[asyncpg.Record]:
    """The tenant's rows after `tenant create`'s own (token.create by the operator)."""
    rows = await pool.fetch("SELECT * FROM audit_event WHERE tenant_id = $1 ORDER BY at, id",
                            tenant_id)
    assert rows[0]["action"] == "token.create" and rows[0]["actor"] == {"operator": "cli"}
    return rows[1:]


async def test_every_change_has_one_row_naming_who_what_and_how(api: Api) -> None:
    tenant = await api.tenant("audited")
    headers = {**tenant.headers, "X-Request-ID": "req-create-1"}
    created = await api.client.post("/v1/schedules", json=schedule_body(
        target={"url": "http://127.0.0.1:9/hook", "headers": {"x-api-key": "s3cret"}}),
        headers=headers)
    assert created.status_code == 201, created.text
    schedule_id = created.json()["id"]
    path = f"/v1/schedules/{schedule_id}"
    patched = await api.client.patch(path, json={
        "name": "renamed", "target": {"headers": {"x-api-key": "n3w"}}}, headers=tenant.headers)
    assert patched.status_code == 200, patched.text
    for step in ("pause", "resume", "rotate-secret", "trigger"):
        assert (await api.client.post(f"{path}/{step}", headers=tenant.headers)).is_success
    assert (await api.client.put("/v1/alerts", json={"url": "http://127.0.0.1:9/alerts"},
                                 headers=tenant.headers)).status_code == 200
    assert (await api.client.delete(path, headers=tenant.headers)).status_code == 204

    rows = await _audit(api.pool, tenant.id)
    assert [r["action"] for r in rows] == [
        "schedule.create", "schedule.update", "schedule.pause", "schedule.resume",
        "schedule.rotate_secret", "schedule.trigger", "alerts.update", "schedule.delete"]
    token = await api.pool.fetchrow("SELECT id, name FROM api_token WHERE tenant_id = $1",
                                    tenant.id)
    first = rows[0]
    assert first["actor"] == {"token_id": str(token["id"]), "token_name": token["name"]}
    assert first["request_id"] == "req-create-1"
    assert first["client_address"] == "127.0.0.1"
    assert first["object_type"] == "schedule" and first["object_id"] == schedule_id
    assert first["changes"]["name"] == [None, "nightly-report"]
    assert first["changes"]["target.headers.x-api-key"] == [None, "***"]
    update = rows[1]["changes"]
    assert update == {"name": ["nightly-report", "renamed"],
                      "target.headers.x-api-key": ["***", "***"]}
    assert rows[2]["changes"]["status"] == ["active", "paused"]
    assert rows[4]["changes"] == {"signing_secret": ["***", "***"]}
    assert rows[7]["changes"] == {"status": ["active", "deleted"]}
    text = str([dict(r) for r in rows])
    assert "s3cret" not in text and "n3w" not in text and "whsec_" not in text


async def test_a_change_that_changes_nothing_writes_no_row_and_no_version(api: Api) -> None:
    tenant = await api.tenant("idle")
    created = await api.create_schedule(tenant)
    path = f"/v1/schedules/{created['id']}"
    same = await api.client.patch(path, json={"name": created["name"]}, headers=tenant.headers)
    assert same.status_code == 200 and same.json()["version"] == 1
    assert same.headers["ETag"] == '"1"'
    assert [r["action"] for r in await _audit(api.pool, tenant.id)] == ["schedule.create"]


async def test_the_audit_route_pages_newest_first_with_filters(api: Api) -> None:
    tenant = await api.tenant("pages")
    ids = [(await api.create_schedule(tenant, name=f"s{i}"))["id"] for i in range(5)]
    for schedule_id in ids[:2]:
        await api.client.patch(f"/v1/schedules/{schedule_id}", json={"name": "changed"},
                               headers=tenant.headers)
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = (await api.client.get("/v1/audit", params={"limit": 3, **(
            {"cursor": cursor} if cursor else {})}, headers=tenant.headers)).json()
        seen += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 8 and len({e["id"] for e in seen}) == 8  # with the first token's
    assert [e["at"] for e in seen] == sorted((e["at"] for e in seen), reverse=True)
    assert seen[0]["action"] == "schedule.update"
    one = (await api.client.get("/v1/audit", params={"object_id": ids[0]},
                                headers=tenant.headers)).json()["items"]
    assert [e["action"] for e in one] == ["schedule.update", "schedule.create"]
    updates = (await api.client.get("/v1/audit", params={"action": "schedule.update"},
                                    headers=tenant.headers)).json()["items"]
    assert {e["object_id"] for e in updates} == set(ids[:2])
    now = await api.pool.fetchval("SELECT now()")
    later = (await api.client.get("/v1/audit", params={
        "since": (now + timedelta(hours=1)).isoformat()}, headers=tenant.headers)).json()
    assert later["items"] == []
    bad = await api.client.get("/v1/audit", params={"cursor": "nonsense"},
                               headers=tenant.headers)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "cursor"


class _Killing:
    """The store's pool, but the connection of its transaction is terminated from another
    connection after the ``after``-th statement inside the transaction (None: never)."""

    def __init__(self, pool: asyncpg.Pool, after: int | None) -> None:
        self._pool = pool
        self.after = after
        self.killed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        async with self._pool.acquire() as conn:
            yield _Statements(self, conn)

    async def kill(self, conn: asyncpg.Connection) -> None:
        await self._pool.execute("SELECT pg_terminate_backend($1)", conn.get_server_pid())
        self.killed = True


class _Statements:
    def __init__(self, owner: _Killing, conn: asyncpg.Connection) -> None:
        self._owner, self._conn, self._count = owner, conn, 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._conn, name)
        if name not in {"execute", "executemany", "fetch", "fetchrow", "fetchval"}:
            return real

        async def counted(*args: Any, **kwargs: Any) -> Any:
            result = await real(*args, **kwargs)
            self._count += 1
            if self._count == self._owner.after:
                await self._owner.kill(self._conn)
            return result

        return counted


async def test_the_row_commits_with_the_change_or_not_at_all(db_pool: asyncpg.Pool,
                                                             api: Api) -> None:
    tenant = await api.tenant("killed")
    created = await api.create_schedule(tenant, name="before")
    schedule_id = uuid.UUID(created["id"])
    change = Change(Actor(operator="test"), "req-kill")
    outcomes = []
    for after in [*range(1, 12), None]:
        killing = _Killing(db_pool, after)
        store = PostgresScheduleStore(killing, secret_box(db_pool))  # type: ignore[arg-type]
        name = f"after-{after}"
        try:
            await store.update(tenant.id, schedule_id, lambda s, n=name: replace(s, name=n),
                               change=change)
            committed = True
        except StorageError:
            committed = False
        row_name = await db_pool.fetchval("SELECT name FROM schedule WHERE id = $1",
                                          schedule_id)
        rows = await db_pool.fetchval(
            "SELECT count(*) FROM audit_event WHERE tenant_id = $1 AND changes->'name'->>1 = $2",
            tenant.id, name)
        changed = row_name == name
        assert changed == committed and rows == (1 if changed else 0), (after, changed, rows)
        outcomes.append((after, killing.killed, changed))
    # every statement of the transaction was a place to die, and the last run lived
    assert any(killed and not changed for _, killed, changed in outcomes)
    assert outcomes[-1] == (None, False, True)
    assert sum(1 for _, killed, _ in outcomes if killed) >= 5


async def test_partitions_past_retention_are_dropped(db_pool: asyncpg.Pool) -> None:
    store = PostgresMaintenanceStore(db_pool)
    await db_pool.execute("SELECT cronwire_ensure_audit_partitions("
                          "(now() - interval '20 months')::date, 1)")
    old = await db_pool.fetchval("SELECT 'audit_event_' || to_char(now() - interval "
                                 "'20 months', '\"p\"YYYY_MM')")
    tenant = uuid.uuid4()
    await db_pool.execute(
        "INSERT INTO audit_event (tenant_id, at, actor, action, object_type, changes) VALUES "
        "($1, now() - interval '20 months', '{}', 'schedule.update', 'schedule', '{}'), "
        "($1, now() - interval '3 days', '{}', 'schedule.update', 'schedule', '{}'), "
        "($1, now(), '{}', 'schedule.update', 'schedule', '{}')", tenant)
    _, dropped, deleted = await store.maintain_audit_log(2, 2, 100, 10)
    assert old in dropped
    assert deleted == 1  # the row 3 days old, past a 2-day retention, in a kept month
    assert await db_pool.fetchval("SELECT count(*) FROM audit_event WHERE tenant_id = $1",
                                  tenant) == 1
    partitions = await store.audit_partitions()
    assert old not in partitions and len(partitions) >= 3
