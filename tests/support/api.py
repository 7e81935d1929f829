"""The tenant API in-process over real Postgres: httpx.AsyncClient on an ASGITransport.

``api`` builds the app from the real adapters on the test's own database (no mocks);
``Tenant`` holds a token issued by the real token store. Import the fixture into a test
module with ``from tests.support.api import api_fixture  # noqa: F401``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.postgres.alert_store import PostgresAlertStore
from cronwire.adapters.postgres.audit_log import PostgresAuditLog
from cronwire.adapters.postgres.calendar_store import PostgresCalendarStore
from cronwire.adapters.postgres.flow_store import PostgresFlowControl
from cronwire.adapters.postgres.run_commands import PostgresRunCommands
from cronwire.adapters.postgres.run_history import PostgresRunHistory
from cronwire.adapters.postgres.schedule_stats import PostgresStatsReader
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.adapters.postgres.token_store import PostgresTokenStore
from cronwire.api.app import build_tenant_routers, create_app
from cronwire.api.context import ApiContext
from cronwire.domain.schedules import TenantLimits
from tests.support.secrets import secret_box

DEFAULT_LIMITS = TenantLimits(max_schedules=100, min_interval_seconds=1,
                              max_body_bytes=65_536, max_headers=32)


async def _ready() -> dict[str, bool]:
    return {"database": True}


@dataclass(frozen=True)
class Tenant:
    id: uuid.UUID
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def schedule_body(**overrides: Any) -> dict[str, Any]:
    """A valid create body (loopback target: tests run with private targets allowed)."""
    body: dict[str, Any] = {
        "name": "nightly-report",
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "target": {"url": "http://127.0.0.1:9/hook", "method": "POST",
                   "headers": {"x-custom": "1"}, "body": "{\"k\": 1}"},
        "retry": {"max_attempts": 5, "initial_backoff_seconds": 10, "max_backoff_seconds": 3600},
        "misfire_policy": "fire_all",
        "starts_at": None, "ends_at": None, "paused": False,
    }
    body.update(overrides)
    return body


@dataclass
class Api:
    client: httpx.AsyncClient
    pool: asyncpg.Pool
    tenants: PostgresTenantStore

    async def tenant(self, name: str = "tenant") -> Tenant:
        issued = await self.tenants.create(name)
        return Tenant(issued.tenant_id, issued.token)

    async def create_schedule(self, tenant: Tenant, **overrides: Any) -> dict[str, Any]:
        response = await self.client.post("/v1/schedules", json=schedule_body(**overrides),
                                          headers=tenant.headers)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created


def api_context(pool: asyncpg.Pool, *, allow_private: bool = True,
                limits: TenantLimits = DEFAULT_LIMITS, max_request_bytes: int = 262_144,
                ) -> ApiContext:
    return ApiContext(
        tokens=PostgresTokenStore(pool),
        audit=PostgresAuditLog(pool),
        schedules=PostgresScheduleStore(pool, secret_box(pool)),
        runs=PostgresRunHistory(pool),
        commands=PostgresRunCommands(pool),
        check_url=TargetGuard(allow_private=allow_private).check_url,
        default_limits=limits,
        flows=PostgresFlowControl(pool),
        max_request_bytes=max_request_bytes,
        stats=PostgresStatsReader(pool),
        alerts=PostgresAlertStore(pool, secret_box(pool)),
        calendars=PostgresCalendarStore(pool),
    )


def asgi_client(ctx: ApiContext) -> httpx.AsyncClient:
    app = create_app(_ready, lambda: b"", build_tenant_routers(ctx))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cronwire")


@pytest.fixture(name="api")
async def api_fixture(db_pool: asyncpg.Pool) -> AsyncIterator[Api]:
    async with asgi_client(api_context(db_pool)) as client:
        yield Api(client, db_pool, PostgresTenantStore(db_pool))


@pytest.fixture(name="api_variant")
def api_variant_fixture(api: Api) -> Any:
    """A factory of clients on the same database whose ApiContext has other fields
    (limits, body cap, address policy): ``api_variant(max_request_bytes=1024)``."""

    def make(**kwargs: Any) -> httpx.AsyncClient:
        return asgi_client(dataclasses.replace(api_context(api.pool), **kwargs))

    return make


STATUS_CYCLE = ["succeeded", "failed", "pending", "retrying", "running", "skipped", "cancelled"]


async def insert_runs(pool: asyncpg.Pool, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                      count: int, *, newest: datetime, step: timedelta,
                      statuses: Sequence[str] = STATUS_CYCLE) -> None:
    """``count`` runs of one schedule at ``newest``, ``newest - step``, ... in one statement,
    their status cycling through ``statuses`` (newest first)."""
    await pool.execute(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                status, fire_after)
           SELECT gen_random_uuid(), $1, $2, $3::timestamptz - g * $4::interval, 'seed-' || g,
                  ($5::text[])[1 + g % cardinality($5::text[])],
                  $3::timestamptz - g * $4::interval
           FROM generate_series(0, $6 - 1) AS g""",
        tenant_id, schedule_id, newest, step, list(statuses), count,
    )
