"""`cronwire tenant limit`: an operator sets a tenant's own cap on requests in flight (the
`tenant.max_concurrency` column the claims read, ADR 0040) and on its runs not yet ended
(`tenant.max_pending_runs`, ADR 0055) without writing SQL."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from tests.support.cli_shell import InProcess, Live


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        database_url: str) -> InProcess:
    return InProcess(monkeypatch, capsys, Live(database_url, "http://127.0.0.1:9"))


def _stored(dsn: str, tenant_id: str, column: str = "max_concurrency") -> int | None:
    assert column in {"max_concurrency", "max_pending_runs"}

    async def read() -> int | None:
        conn = await asyncpg.connect(dsn)
        try:
            value: int | None = await conn.fetchval(
                f"SELECT {column} FROM tenant WHERE id = $1", uuid.UUID(tenant_id))
            return value
        finally:
            await conn.close()

    return asyncio.run(read())


def test_a_tenants_limit_is_set_and_lifted(cli: InProcess, database_url: str) -> None:
    tenant = cli.ok("tenant", "create", "acme")["tenant_id"]
    assert _stored(database_url, tenant) is None
    set_to = cli.ok("tenant", "limit", tenant, "--max-concurrency", "3")
    assert set_to == {"id": tenant, "name": "acme", "max_concurrency": 3,
                      "max_pending_runs": None}
    assert _stored(database_url, tenant) == 3
    lifted = cli.ok("tenant", "limit", tenant, "--unlimited")
    assert lifted["max_concurrency"] is None and _stored(database_url, tenant) is None


def test_a_tenants_pending_runs_limit_is_set_and_lifted(cli: InProcess,
                                                        database_url: str) -> None:
    tenant = cli.ok("tenant", "create", "acme")["tenant_id"]
    set_to = cli.ok("tenant", "limit", tenant, "--max-pending-runs", "5000")
    assert set_to == {"id": tenant, "name": "acme", "max_concurrency": None,
                      "max_pending_runs": 5000}
    assert _stored(database_url, tenant, "max_pending_runs") == 5000
    both = cli.ok("tenant", "limit", tenant, "--max-concurrency", "4", "--default-pending-runs")
    assert (both["max_concurrency"], both["max_pending_runs"]) == (4, None)
    assert _stored(database_url, tenant, "max_pending_runs") is None


@pytest.mark.parametrize("args", [
    ["--max-concurrency", "0"], ["--max-concurrency", "many"], [],
    ["--max-concurrency", "2", "--unlimited"],
    ["--max-pending-runs", "0"], ["--max-pending-runs", "2147483648"],
    ["--max-pending-runs", "3", "--default-pending-runs"],
])
def test_bad_limits_are_one_line_and_exit_2(cli: InProcess, args: list[str]) -> None:
    tenant = cli.ok("tenant", "create", "acme")["tenant_id"]
    cli.refused("tenant", "limit", tenant, *args, code=2)


def test_an_unknown_tenant_names_the_database(cli: InProcess) -> None:
    line = cli.refused("tenant", "limit", str(uuid.uuid4()), "--max-concurrency", "2", code=2)
    assert "does not exist in database postgresql://" in line
    assert "not a UUID" in cli.refused("tenant", "limit", "nope", "--unlimited", code=2)
