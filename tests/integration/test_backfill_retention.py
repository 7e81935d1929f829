"""A backfill anywhere inside the retention months is accepted on a new database:
the partition keeper creates the months retention keeps, not only last month."""

from __future__ import annotations

from datetime import UTC, datetime

from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.service.maintenance import PartitionKeeper
from tests.support.api import Api, api_fixture  # noqa: F401 - fixture


def _first_of_month(moment: datetime, months_back: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 - months_back
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


async def test_a_backfill_from_the_oldest_kept_month_is_accepted(api: Api) -> None:
    # A new database: the migrations' partitions, then one pass of the keeper (as serve
    # runs it at start) with the default retention of 3 months (this one and two before).
    keeper = PartitionKeeper(PostgresMaintenanceStore(api.pool), retention_months=3,
                             interval_seconds=3600, audit_retention_days=400)
    await keeper.run_once()
    now: datetime = await api.pool.fetchval("SELECT now()")
    oldest_kept = _first_of_month(now, 2)
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant, cron="0 3 * * *", timezone="UTC")
    response = await api.client.post(
        f"/v1/schedules/{schedule['id']}/backfill", headers=tenant.headers,
        json={"start": oldest_kept.isoformat(), "end": _first_of_month(now, 1).isoformat()})
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["created"] == body["occurrences"] >= 28
    assert body["first"][0] == oldest_kept.replace(hour=3).isoformat().replace("+00:00", "Z")
    # Before the oldest kept month the refusal still names retention.
    older = await api.client.post(
        f"/v1/schedules/{schedule['id']}/backfill", headers=tenant.headers,
        json={"start": _first_of_month(now, 3).isoformat(), "end": oldest_kept.isoformat()})
    assert older.status_code == 422
    assert older.json()["error"]["field"] == "start"
    assert f"runs are kept from {oldest_kept.isoformat()}" in older.json()["error"]["message"]
