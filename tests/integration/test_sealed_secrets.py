"""Sealed secrets over real Postgres (ADR 0061): a dump of every table holds no
tenant secret in any common encoding, a sealed value opens only where it was sealed, reads
mask header values and a PATCH sending the mask keeps them, the start-up pass seals what
was stored in clear, a wrong key ring is refused, and `keys rotate` re-wraps every data key
so the old key can go."""

from __future__ import annotations

import base64
import dataclasses
import uuid
from collections.abc import Collection

import asyncpg
import pytest

from cronwire.adapters.crypto.envelope import EnvelopeSecretBox
from cronwire.adapters.crypto.key_ring import KeyRing
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.data_key_store import PostgresDataKeyStore
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.adapters.postgres.sealing_pass import PostgresSealingPass
from cronwire.config import Settings
from cronwire.domain.errors import ConfigError
from cronwire.domain.model import ClaimedRun
from cronwire.domain.secrets import SecretError, schedule_header_context, schedule_secret_context
from cronwire.harness.seeding import SeededSchedule, seed_due_runs, seed_tenant
from cronwire.ports.secrets import SecretBox
from cronwire.service.secret_keys import key_status, prove_key_ring, rotate_data_keys
from tests.support.api import Api, api_fixture  # noqa: F401 - the fixture
from tests.support.certificates import Authority
from tests.support.secrets import TEST_SECRET_KEYS, secret_box

CA = Authority()
BEARER = "Bearer sk_live_" + "q7" * 20
API_KEY = "apikey-" + uuid.uuid4().hex


def encodings(secret: str) -> set[str]:
    """The secret as text, base64 (both alphabets, with and without padding) and hex,
    of itself and, for a whsec_ secret, of the key bytes it carries; for a PEM private key,
    of its DER bytes too (and each line of its body)."""
    raws = [secret.encode()]
    found = set()
    if secret.startswith("whsec_") and len(secret) > 20:
        raws.append(base64.b64decode(secret.removeprefix("whsec_")))
    if secret.startswith("-----BEGIN"):
        body = [line for line in secret.splitlines() if line and not line.startswith("-----")]
        raws.append(base64.b64decode("".join(body)))
        found |= set(body)
    found.add(secret)
    for raw in raws:
        for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
            found |= {encoded.decode(), encoded.decode().rstrip("=")}
        found |= {raw.hex(), raw.hex().upper()}
    return {text for text in found if len(text) >= 12}


async def dump(pool: asyncpg.Pool) -> str:
    """Every row of every table of the database, each cast to text (as pg_dump would
    print its columns; bytea as hex)."""
    tables = await pool.fetch(
        "SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables "
        "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")
    assert len(tables) > 10
    parts = []
    for table in tables:
        rows = await pool.fetch(f"SELECT t::text AS row FROM {table['name']} AS t")
        parts.extend(row["row"] for row in rows)
    return "\n".join(parts)


async def test_a_dump_of_every_table_holds_none_of_the_secrets(api: Api) -> None:
    tenant, other = await api.tenant("a"), await api.tenant("b")
    secrets: list[str] = [BEARER, API_KEY]
    for who in (tenant, other):
        created = await api.create_schedule(who, target={
            "url": "http://127.0.0.1:9/hook", "headers": {"Authorization": BEARER,
                                                           "X-Api-Key": API_KEY}})
        secrets.append(created["signing_secret"])
        rotated = await api.client.post(f"/v1/schedules/{created['id']}/rotate-secret",
                                        headers=who.headers)
        secrets.append(rotated.json()["signing_secret"])  # the first is the previous now
        alerts = await api.client.put("/v1/alerts", json={"url": "http://127.0.0.1:9/a"},
                                      headers=who.headers)
        secrets.append(alerts.json()["signing_secret"])
        tls = CA.client_tls(f"client-of-{who.id}")  # a client certificate (mTLS)
        await api.create_schedule(who, target={"url": "https://127.0.0.1:9/m", "tls": tls})
        secrets.append(tls["client_key"])
        replaced = CA.client_tls("replaced")  # and one that replaced it by a PATCH
        secrets.append(replaced["client_key"])
        patched = await api.client.patch(f"/v1/schedules/{created['id']}", headers=who.headers,
                                         json={"target": {"tls": replaced}})
        assert patched.status_code == 200, patched.text
    text = await dump(api.pool)
    assert "cws1:" in text and "BEGIN CERTIFICATE" in text  # sealed keys, public certificates
    leaked = sorted(form for secret in secrets for form in encodings(secret) if form in text)
    assert leaked == []


async def test_a_sealed_value_opens_only_in_its_own_row_tenant_and_field(api: Api) -> None:
    tenant, other = await api.tenant("a"), await api.tenant("b")
    mine = await api.create_schedule(tenant)
    sibling = await api.create_schedule(tenant)
    theirs = await api.create_schedule(other)
    sealed = await api.pool.fetchval("SELECT signing_secret FROM schedule WHERE id = $1",
                                     uuid.UUID(mine["id"]))
    box = secret_box(api.pool)
    assert await box.unseal(tenant.id, sealed, schedule_secret_context(
        uuid.UUID(mine["id"]))) == mine["signing_secret"]
    for owner, row in ((tenant.id, sibling["id"]), (other.id, theirs["id"])):
        with pytest.raises(SecretError):
            await box.unseal(owner, sealed, schedule_secret_context(uuid.UUID(row)))
    with pytest.raises(SecretError):  # another field of its own row
        await box.unseal(tenant.id, sealed, schedule_header_context(
            uuid.UUID(mine['id']), "authorization"))
    # Copied into the sibling's row, the claim does not deliver it: nothing is signed
    # with a secret that did not open.
    await api.pool.execute("UPDATE schedule SET signing_secret = $1 WHERE id = $2", sealed,
                           uuid.UUID(sibling["id"]))
    await seed_due_runs(api.pool, _seeded(tenant.id, sibling["id"]), 1)
    claimed = await PostgresClaimSource(api.pool, box).claim("replica", 10, 30)
    assert claimed.runs == ()


async def test_a_tenant_whose_data_key_does_not_open_stops_only_its_own_runs(
        api: Api) -> None:
    broken, fine = await api.tenant("broken"), await api.tenant("fine")
    schedules = {who: await api.create_schedule(who) for who in (broken, fine)}
    await api.pool.execute(  # the wrapped key altered in place: same key id, other bytes
        "UPDATE secret_data_key SET wrapped = overlay(wrapped PLACING '\\x00'::bytea "
        "FROM 20 FOR 1) WHERE tenant_id = $1", broken.id)
    for who, created in schedules.items():
        await seed_due_runs(api.pool, _seeded(who.id, created["id"]), 1)
    claimed = await PostgresClaimSource(api.pool, secret_box(api.pool)).claim("r", 10, 30)
    assert [run.schedule_id for run in claimed.runs] == [uuid.UUID(schedules[fine]["id"])]
    assert claimed.runs[0].signing_secrets == (schedules[fine]["signing_secret"],)


def _seeded(tenant_id: uuid.UUID, schedule_id: str) -> SeededSchedule:
    return SeededSchedule(uuid.UUID(schedule_id), tenant_id, "", "")


async def test_reads_mask_header_values_and_a_patch_sending_the_mask_keeps_them(
        api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, target={
        "url": "http://127.0.0.1:9/hook", "headers": {"Authorization": BEARER, "X-A": "1"}})
    assert created["target"]["headers"] == {"Authorization": "***", "X-A": "***"}
    got = (await api.client.get(f"/v1/schedules/{created['id']}", headers=tenant.headers)).json()
    listed = (await api.client.get("/v1/schedules", headers=tenant.headers)).json()["items"]
    assert got["target"]["headers"] == listed[0]["target"]["headers"] == created["target"]["headers"]
    patched = await api.client.patch(
        f"/v1/schedules/{created['id']}", headers=tenant.headers,
        json={"target": {"url": "http://127.0.0.1:9/other",
                         "headers": {"Authorization": "***", "X-A": "2", "X-New": "3"}}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["target"]["headers"] == {"Authorization": "***", "X-A": "***",
                                                   "X-New": "***"}
    record = await _store(api).get(tenant.id, uuid.UUID(created["id"]))
    assert dict(record.spec.target.headers) == {"Authorization": BEARER, "X-A": "2",
                                                "X-New": "3"}
    unknown = await api.client.patch(f"/v1/schedules/{created['id']}", headers=tenant.headers,
                                     json={"target": {"headers": {"X-Missing": "***"}}})
    assert unknown.status_code == 422
    assert unknown.json()["error"]["field"] == "target.headers.X-Missing"


def _store(api: Api) -> PostgresScheduleStore:
    return PostgresScheduleStore(api.pool, secret_box(api.pool))


async def test_the_start_up_pass_seals_what_was_stored_in_clear(db_pool: asyncpg.Pool) -> None:
    tenant = await seed_tenant(db_pool)
    schedule_id = uuid.uuid4()
    target = {"url": "http://127.0.0.1:9/", "method": "POST", "body": None,
              "headers": {"Authorization": BEARER}}
    await db_pool.execute(  # as a database written before sealing holds it
        "INSERT INTO schedule (id, tenant_id, name, cron, target, retry, signing_secret, "
        "previous_signing_secret, previous_secret_expires_at, next_fire_at) VALUES "
        "($1, $2, 'old', '* * * * *', $3::jsonb, '{}'::jsonb, 'whsec_' || $4, "
        "'whsec_' || $5, now() + interval '1 day', NULL)",
        schedule_id, tenant, target, base64.b64encode(b"k" * 24).decode(),
        base64.b64encode(b"p" * 24).decode())
    await db_pool.execute("INSERT INTO tenant_alert_destination (tenant_id, url, events, "
                          "signing_secret) VALUES ($1, 'http://127.0.0.1:9/a', "
                          "ARRAY['schedule.late'], 'whsec_clear_alert_secret')", tenant)
    box = secret_box(db_pool)
    assert await PostgresSealingPass(db_pool, box, batch=1).run() == 2
    assert await PostgresSealingPass(db_pool, box).run() == 0  # idempotent
    leaked = [form for secret in (BEARER, "whsec_clear_alert_secret", "k" * 24)
              for form in encodings(secret) if form in await dump(db_pool)]
    assert leaked == []
    await seed_due_runs(db_pool, _seeded(tenant, str(schedule_id)), 1)
    [run] = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("r", 10, 30)).runs
    assert run.target.headers == {"Authorization": BEARER}
    assert run.signing_secrets == ("whsec_" + base64.b64encode(b"k" * 24).decode(),
                                   "whsec_" + base64.b64encode(b"p" * 24).decode())


async def test_a_key_ring_that_does_not_open_the_data_keys_is_refused(api: Api) -> None:
    await api.create_schedule(await api.tenant())
    store = PostgresDataKeyStore(api.pool)
    await prove_key_ring(KeyRing(TEST_SECRET_KEYS), store)
    (key_id, _), = TEST_SECRET_KEYS
    with pytest.raises(ConfigError, match=r"SCHEDULER_SECRET_KEYS.*does not open"):
        await prove_key_ring(KeyRing([(key_id, b"\x01" * 32)]), store)
    with pytest.raises(ConfigError, match=rf"SCHEDULER_SECRET_KEYS.*{key_id}.*not hold"):
        await prove_key_ring(KeyRing([("other", b"\x01" * 32)]), store)


async def test_rotation_rewraps_every_data_key_so_the_old_key_can_go(api: Api) -> None:
    tenants = [await api.tenant(f"t{i}") for i in range(5)]
    created = [await api.create_schedule(t, target={
        "url": "http://127.0.0.1:9/hook", "headers": {"Authorization": BEARER}})
        for t in tenants]
    store = PostgresDataKeyStore(api.pool)
    old = TEST_SECRET_KEYS
    new = (("new", b"\x42" * 32),)
    assert dict(await key_status(store)) == {old[0][0]: 5}
    both = KeyRing(new + old)
    assert await rotate_data_keys(both, store, batch=2) == 5
    assert await rotate_data_keys(both, store, batch=2) == 0  # idempotent
    assert dict(await key_status(store)) == {"new": 5}
    only_new = EnvelopeSecretBox(KeyRing(new), store)
    await prove_key_ring(KeyRing(new), store)
    for tenant, schedule in zip(tenants, created, strict=True):
        sealed = await api.pool.fetchval("SELECT signing_secret FROM schedule WHERE id = $1",
                                         uuid.UUID(schedule["id"]))
        assert await only_new.unseal(tenant.id, sealed, schedule_secret_context(
            uuid.UUID(schedule["id"]))) == schedule["signing_secret"]
    with pytest.raises(ConfigError):
        await prove_key_ring(KeyRing(old), store)


def test_settings_never_show_the_key_ring() -> None:
    shown = repr(dataclasses.replace(Settings(), secret_keys=TEST_SECRET_KEYS))
    assert base64.b64encode(TEST_SECRET_KEYS[0][1]).decode() not in shown
    assert "secret_keys=" not in shown


class _CountingBox:
    """The real box, counting what the claim opens."""

    def __init__(self, inner: SecretBox) -> None:
        self.inner, self.opened = inner, 0

    async def seal(self, tenant_id: uuid.UUID, plaintext: str, context: str) -> str:
        return await self.inner.seal(tenant_id, plaintext, context)

    async def unseal(self, tenant_id: uuid.UUID, sealed: str, context: str) -> str:
        return await self.inner.unseal(tenant_id, sealed, context)

    async def load(self, tenant_ids: Collection[uuid.UUID]) -> None:
        await self.inner.load(tenant_ids)

    def unseal_loaded(self, tenant_id: uuid.UUID, sealed: str, context: str) -> str:
        self.opened += 1
        return self.inner.unseal_loaded(tenant_id, sealed, context)


async def test_the_claim_opens_a_schedule_once_until_a_patch_or_rotation_changes_it(
        api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, target={
        "url": "http://127.0.0.1:9/hook", "headers": {"Authorization": BEARER}})
    schedule = _seeded(tenant.id, created["id"])
    box = _CountingBox(secret_box(api.pool))
    source = PostgresClaimSource(api.pool, box)

    async def claim_one(first: int) -> ClaimedRun:
        await seed_due_runs(api.pool, schedule, 1, first=first)
        [run] = (await source.claim("replica", 10, 30)).runs
        return run

    for n in range(3):
        run = await claim_one(n)
        assert run.signing_secrets == (created["signing_secret"],)
        assert run.target.headers == {"Authorization": BEARER}
    assert box.opened == 2  # the secret and the header, once for three runs

    rotated = (await api.client.post(f"/v1/schedules/{created['id']}/rotate-secret",
                                     headers=tenant.headers)).json()
    run = await claim_one(10)
    assert run.signing_secrets == (rotated["signing_secret"], created["signing_secret"])
    assert box.opened == 4  # both secrets; the header's text did not change
    await api.client.patch(f"/v1/schedules/{created['id']}", headers=tenant.headers,
                           json={"target": {"headers": {"Authorization": "Bearer new"}}})
    run = await claim_one(20)
    assert run.target.headers == {"Authorization": "Bearer new"}
    assert (await claim_one(21)).target.headers == {"Authorization": "Bearer new"}
    assert box.opened == 5  # the new header once; the secrets' text did not change


async def test_a_read_of_a_value_that_does_not_open_is_a_503_never_a_500(api: Api) -> None:
    tenant = await api.tenant()
    mine, sibling = await api.create_schedule(tenant), await api.create_schedule(tenant)
    await api.pool.execute(  # a value moved from another row: it does not open here
        "UPDATE schedule SET signing_secret = (SELECT signing_secret FROM schedule "
        "WHERE id = $1) WHERE id = $2", uuid.UUID(mine["id"]), uuid.UUID(sibling["id"]))
    response = await api.client.get(f"/v1/schedules/{sibling['id']}", headers=tenant.headers)
    assert response.status_code == 503 and "key ring" in response.json()["error"]["message"]
    assert (await api.client.get(f"/v1/schedules/{mine['id']}",
                                 headers=tenant.headers)).status_code == 200


async def test_two_first_seals_of_a_tenant_at_once_both_read_the_key_that_won(
        db_pool: asyncpg.Pool) -> None:
    """One replica's insert of a tenant's data key is still uncommitted when another's
    arrives: the second waits on it, does nothing, and must read the winner's key (its
    statement's snapshot predates the row; before, an assertion failed there)."""
    import asyncio

    from cronwire.domain.secrets import DataKeyRecord

    tenant = await seed_tenant(db_pool, "racing")
    store = PostgresDataKeyStore(db_pool)
    winner = DataKeyRecord(uuid.uuid4(), tenant, "k1", b"w" * 60)  # wrapped: 60 bytes
    async with db_pool.acquire() as first:
        transaction = first.transaction()
        await transaction.start()
        await first.execute("INSERT INTO secret_data_key (id, tenant_id, key_id, wrapped) "
                            "VALUES ($1, $2, $3, $4)", winner.id, tenant, "k1", winner.wrapped)
        second = asyncio.create_task(store.insert_if_absent(
            DataKeyRecord(uuid.uuid4(), tenant, "k1", b"l" * 60)))
        await asyncio.sleep(0.5)  # the second insert now waits on the first's row
        assert not second.done()
        await transaction.commit()
        read = await asyncio.wait_for(second, 10)
    assert read.id == winner.id and read.wrapped == winner.wrapped
