"""Client certificates (mTLS, ADR 0061) over real Postgres: a receiver that requires one
(Python ``ssl``, ``CERT_REQUIRED``, on loopback; every certificate made in the test)
accepts cronwire's delivery from a schedule with ``target.tls`` and refuses one without,
whose attempt records the TLS failure; both deliverers. The API refuses a bad PEM, a key
of another certificate and an expired certificate with a 422 naming the field, shows only
the subject and expiry, keeps the key sealed, and the fleet gauge sees the expiry."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.adapters.postgres.sealed_fields import opened_record
from cronwire.bootstrap.executor import build_executor
from cronwire.domain.breaker import BreakerPolicy
from cronwire.domain.client_tls import client_tls_from_pem
from cronwire.domain.delivery import DeliveryRequest
from cronwire.harness.seeding import SeededSchedule, seed_due_runs
from cronwire.service.executor import ExecutorSettings
from cronwire.service.maintenance import FleetGauges
from tests.integration.test_sealed_secrets import dump, encodings
from tests.support.api import Api, Tenant, api_fixture  # noqa: F401 - the fixture
from tests.support.certificates import Authority, mutual_tls_receiver
from tests.support.executor_harness import running
from tests.support.polling import wait_until
from tests.support.secrets import secret_box

CA = Authority()


@pytest.fixture(params=["lean", "httpx"])
async def deliverer(request: pytest.FixtureRequest, tmp_path: Path
                    ) -> AsyncIterator[LeanDeliverer | HttpxDeliverer]:
    guard, trusted = TargetGuard(allow_private=True), str(CA.write(tmp_path))
    made = (LeanDeliverer(guard, trusted_cas=trusted) if request.param == "lean"
            else HttpxDeliverer(guard, trusted_cas=trusted))
    await made.start()
    yield made
    await made.close()


async def _create(api: Api, tenant: Tenant, url: str, **target: Any) -> dict[str, Any]:
    response = await api.client.post("/v1/schedules", headers=tenant.headers, json={
        "name": "mtls", "cron": "0 3 * * *", "timezone": "UTC",
        "target": {"url": url, **target}})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_a_receiver_requiring_a_client_certificate_accepts_ours_and_refuses_none(
        api: Api, deliverer: LeanDeliverer | HttpxDeliverer, tmp_path: Path) -> None:
    tenant = await api.tenant()
    async with mutual_tls_receiver(CA, tmp_path) as receiver:
        with_cert = await _create(api, tenant, receiver.url,
                                  tls=CA.client_tls("billing-client"))
        without = await _create(api, tenant, receiver.url)
        for created in (with_cert, without):
            await seed_due_runs(api.pool, SeededSchedule(
                uuid.UUID(created["id"]), tenant.id, receiver.url, ""), 1)
        executor = build_executor(
            ExecutorSettings(
                owner="mtls", workers=4, batch=4, lease_seconds=6.0, delivery_timeout=3.0,
                grace_seconds=5.0, poll_seconds=0.05, gauge_seconds=0.1,
                breaker_policy=BreakerPolicy(failure_threshold=50, cooldown_seconds=60)),
            claims=PostgresClaimSource(api.pool, secret_box(api.pool)),
            runs=PostgresRunStore(api.pool), breakers=PostgresBreakerStore(api.pool),
            deliverer=deliverer, metrics=PrometheusMetrics(), clock=SystemClock())

        async with running(executor):
            await wait_until(lambda: _both_attempted(api), within=20)
    assert receiver.clients == ["commonName=billing-client"]  # one delivery, with our certificate
    rows = {str(r["schedule_id"]): r for r in await api.pool.fetch(
        "SELECT r.schedule_id, r.status, a.outcome, a.error, a.status_code "
        "FROM job_run r JOIN run_attempt a ON a.run_id = r.id")}
    assert rows[with_cert["id"]]["status"] == "succeeded"
    assert rows[with_cert["id"]]["status_code"] == 200
    refused = rows[without["id"]]
    assert refused["status"] in ("retrying", "failed") and refused["status_code"] is None
    assert refused["outcome"] == "connection_error"
    # The receiver's TLS alert, as the attempt's evidence (not a bare reset).
    assert "SSLError" in refused["error"] and "CERTIFICATE_REQUIRED" in refused["error"]
    assert receiver.refused  # the receiver refused the handshake itself


async def _both_attempted(api: Api) -> bool:
    return int(await api.pool.fetchval(
        "SELECT count(DISTINCT run_id) FROM run_attempt")) >= 2


async def test_reads_show_subject_and_expiry_only_and_a_patch_keeps_or_replaces_it(
        api: Api) -> None:
    tenant = await api.tenant()
    tls = CA.client_tls("reports")
    created = await _create(api, tenant, "https://127.0.0.1:9/h", tls=tls)
    shown = created["target"]["tls"]
    assert shown["client_certificate_subject"] == "CN=reports"
    assert datetime.fromisoformat(shown["client_certificate_not_after"]) > datetime.now(UTC)
    assert set(shown) == {"client_certificate_subject", "client_certificate_not_after"}
    url = f"/v1/schedules/{created['id']}"
    kept = (await api.client.patch(url, headers=tenant.headers,
                                   json={"name": "renamed"})).json()
    assert kept["target"]["tls"] == shown
    replaced = (await api.client.patch(url, headers=tenant.headers, json={
        "target": {"tls": CA.client_tls("reports-2")}})).json()
    assert replaced["target"]["tls"]["client_certificate_subject"] == "CN=reports-2"
    removed = (await api.client.patch(url, headers=tenant.headers,
                                      json={"target": {"tls": None}})).json()
    assert removed["target"]["tls"] is None
    got = (await api.client.get(url, headers=tenant.headers)).json()
    assert got["target"]["tls"] is None


@pytest.mark.parametrize(("tls", "field"), [
    ({"client_certificate": "nope", "client_key": "nope"}, "target.tls.client_certificate"),
    ("mismatch", "target.tls.client_key"),
    ("expired", "target.tls.client_certificate"),
])
async def test_a_bad_certificate_is_a_422_naming_the_field_at_create_and_patch(
        api: Api, tls: Any, field: str) -> None:
    if tls == "mismatch":
        tls = {**CA.client_tls("a"), "client_key": CA.client_tls("b")["client_key"]}
    elif tls == "expired":
        tls = CA.client_tls("old", not_after=datetime.now(UTC) - timedelta(minutes=5))
    tenant = await api.tenant()
    body = {"name": "x", "cron": "0 3 * * *", "timezone": "UTC",
            "target": {"url": "https://127.0.0.1:9/h", "tls": tls}}
    response = await api.client.post("/v1/schedules", headers=tenant.headers, json=body)
    assert response.status_code == 422, response.text
    assert field in response.text
    created = await _create(api, tenant, "https://127.0.0.1:9/h")
    response = await api.client.patch(f"/v1/schedules/{created['id']}",
                                      headers=tenant.headers, json={"target": {"tls": tls}})
    assert response.status_code == 422 and field in response.text


async def test_the_client_key_is_sealed_and_the_gauge_sees_the_earliest_expiry(
        api: Api) -> None:
    tenant = await api.tenant()
    store, metrics = PostgresMaintenanceStore(api.pool), PrometheusMetrics()
    gauges = FleetGauges(store, metrics, SystemClock(), interval_seconds=60)
    await gauges.sample()
    name = "scheduler_client_certificate_expiry_timestamp_seconds"
    assert metrics.registry.get_sample_value(name) == float("inf")
    soon = datetime.now(UTC).replace(microsecond=0) + timedelta(days=3)
    keys = []
    for not_after in (soon + timedelta(days=20), soon):
        tls = CA.client_tls("c", not_after=not_after)
        keys.append(tls["client_key"])
        await _create(api, tenant, "https://127.0.0.1:9/h", tls=tls)
    await gauges.sample()
    assert metrics.registry.get_sample_value(name) == soon.timestamp()
    text = await dump(api.pool)
    body_lines = [line for key in keys for line in key.splitlines() if "PRIVATE" not in line]
    leaked = sorted(form for key in keys for form in encodings(key) if form in text)
    assert leaked == [] and not any(line in text for line in body_lines)
    assert "BEGIN CERTIFICATE" in text  # the certificate is public and stored in clear


@pytest.mark.parametrize("kind", ["lean", "httpx"])
async def test_a_receiver_certificate_from_an_untrusted_authority_is_refused_with_ours_too(
        tmp_path: Path, kind: str) -> None:
    """The context that presents a client certificate still verifies the receiver: without
    the test authority among the trusted ones, the handshake fails on our side."""
    guard = TargetGuard(allow_private=True)
    made = LeanDeliverer(guard) if kind == "lean" else HttpxDeliverer(guard)
    await made.start()
    pem = CA.client_tls("billing-client")
    try:
        async with mutual_tls_receiver(CA, tmp_path) as receiver:
            result = await made.deliver(DeliveryRequest(
                run_id=uuid.uuid4(), schedule_id=uuid.uuid4(), tenant_id=uuid.uuid4(),
                idempotency_key="k", scheduled_for=datetime.now(UTC), attempt=1,
                method="POST", url=receiver.url, headers={}, body=b"{}",
                signing_secrets=("whsec_" + "A" * 32,), timeout_seconds=5,
                client_tls=client_tls_from_pem(pem["client_certificate"], pem["client_key"])))
    finally:
        await made.close()
    assert result.status_code is None and result.error is not None
    assert "CERTIFICATE_VERIFY_FAILED" in result.error, result.error
    assert receiver.clients == []


async def test_a_restored_version_brings_its_certificate_back_and_the_audit_masks_the_key(
        api: Api) -> None:
    tenant = await api.tenant()
    tls = CA.client_tls("payroll")
    created = await _create(api, tenant, "https://127.0.0.1:9/h", tls=tls)
    url = f"/v1/schedules/{created['id']}"
    removed = await api.client.patch(url, headers=tenant.headers, json={"target": {"tls": None}})
    assert removed.status_code == 200 and removed.json()["target"]["tls"] is None
    restored = await api.client.post(f"{url}/revisions/1/restore", headers=tenant.headers)
    assert restored.status_code == 200, restored.text
    assert restored.json()["target"]["tls"]["client_certificate_subject"] == "CN=payroll"
    # The restored key is the one sent at first, sealed again (its PEM opens and matches).
    box = secret_box(api.pool)
    stored = await PostgresScheduleStore(api.pool, box).get(tenant.id, uuid.UUID(created["id"]))
    record = await opened_record(box, stored)
    assert record.spec.target.tls is not None
    assert record.spec.target.tls.key.strip() == tls["client_key"].strip()
    audit = (await api.client.get("/v1/audit", headers=tenant.headers)).json()["items"]
    changed = [entry["changes"] for entry in audit if "target.tls.client_key" in entry["changes"]]
    assert changed and all(set(c["target.tls.client_key"]) <= {"***", None} for c in changed)
