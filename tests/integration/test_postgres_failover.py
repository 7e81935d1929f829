"""A real failover pair (tests/support/pg_ha.py): the writer's pool on a multi-host URL
writes to the primary only, finds the promoted standby by itself, and never writes
through a connection whose server is read-only; the executor carries its results and
leases through a failover as through an outage (ADR 0038).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from cronwire.adapters.embedded.postgres_pair import EmbeddedPostgresPair
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.postgres.connect import NoUsableServer
from cronwire.adapters.postgres.migrator import migrate
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.domain.errors import StorageError
from cronwire.harness.seeding import (
    non_terminal,
    seed_due_runs,
    seed_schedule,
    seed_tenant,
    status_counts,
)
from cronwire.harness.sink import Reply, Sink, always
from tests.support.executor_harness import Harness, running
from tests.support.pg_ha import ha_database, single_host
from tests.support.polling import wait_until
from tests.support.processes import clean_env, run_cli

pytestmark = pytest.mark.slow
# What the harness's own pool raises while there is no primary.
_AWAY = (StorageError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


async def _server_port(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT inet_server_port()"))


async def _write_until_it_lands(store: PostgresTenantStore, name: str) -> None:
    """One tenant written, retried through the outage as the replica's loops retry."""
    async def landed() -> bool:
        try:
            await store.create(name)
        except StorageError:
            return False
        return True

    await wait_until(landed, within=60, every=0.1)


async def test_the_pool_writes_to_the_primary_and_finds_the_promoted_standby(
    pg_pair: EmbeddedPostgresPair,
) -> None:
    dsn = await ha_database(pg_pair)
    pool = await create_pool(dsn, 4)
    try:
        store = PostgresTenantStore(pool)
        await store.create("before")
        assert await _server_port(pool) == pg_pair.primary.port
        await asyncio.to_thread(pg_pair.kill_primary)
        # A killed primary's backends exit only when they notice: a write may still land
        # (and reach the synchronous standby) or fail; either way nothing is lost.
        with contextlib.suppress(StorageError):
            await store.create("during")
        await asyncio.to_thread(pg_pair.promote)
        await _write_until_it_lands(store, "after")
        assert await _server_port(pool) == pg_pair.standby.port
        names = {t.name for t in await store.list_tenants()}
        assert {"before", "after"} <= names
    finally:
        await pool.close()


@pytest.mark.parametrize("attrs", ["read-write", "primary", "any"])
async def test_a_standby_listed_first_is_skipped_whatever_the_url_asks(
    pg_pair: EmbeddedPostgresPair, attrs: str
) -> None:
    """libpq's default (any) takes the first host that answers; the writer asks for a
    writable server whatever the URL says, so a standby listed first is passed over."""
    dsn = await ha_database(pg_pair)
    primary, standby = (f"{s.host}:{s.port}" for s in (pg_pair.primary, pg_pair.standby))
    reversed_dsn = dsn.replace(f"{primary},{standby}", f"{standby},{primary}").replace(
        "target_session_attrs=read-write", f"target_session_attrs={attrs}")
    pool = await create_pool(reversed_dsn, 2)
    try:
        assert await _server_port(pool) == pg_pair.primary.port
        await PostgresTenantStore(pool).create("on the primary")
    finally:
        await pool.close()


async def test_a_standby_that_lacks_the_database_yet_is_passed_over(
    pg_pair: EmbeddedPostgresPair,
) -> None:
    """A database created on the primary that the standby, listed first, has not replayed
    yet: its "database does not exist" means try the next host, not give up. (It gave up:
    `cronwire loadtest` on such a URL failed in the replicas' first migration.)"""
    standby_admin = await asyncpg.connect(pg_pair.standby.dsn)
    try:
        await standby_admin.execute("SELECT pg_wal_replay_pause()")
        dsn = await ha_database(pg_pair, replayed=False)
        primary, standby = (f"{s.host}:{s.port}" for s in (pg_pair.primary, pg_pair.standby))
        assert await migrate(dsn.replace(f"{primary},{standby}", f"{standby},{primary}")) == []
    finally:
        await standby_admin.execute("SELECT pg_wal_replay_resume()")
        await standby_admin.close()


async def test_a_url_naming_only_the_standby_is_never_written_to(
    pg_pair: EmbeddedPostgresPair,
) -> None:
    dsn = await ha_database(pg_pair)
    standby_only = single_host(pg_pair, dsn, standby=True)
    with pytest.raises(NoUsableServer, match="no server fits target_session_attrs=read-write"):
        await create_pool(standby_only, 2)
    with pytest.raises(StorageError, match="applying migrations"):
        await migrate(standby_only)


async def test_a_connection_whose_server_turned_read_only_is_dropped_not_written_through(
    pg_pair: EmbeddedPostgresPair,
) -> None:
    """A primary fenced with default_transaction_read_only (how a failover tool keeps an
    old primary from taking writes): the write on the open connection fails, the pool
    drops that connection on its next acquire, and no new one lands on a read-only
    server; once the standby is promoted, writes go there."""
    dsn = await ha_database(pg_pair)
    pool = await create_pool(dsn, 1)
    admin = await asyncpg.connect(single_host(pg_pair, dsn, standby=False))
    try:
        store = PostgresTenantStore(pool)
        await store.create("before the fence")
        await admin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        await admin.execute("SELECT pg_reload_conf()")
        # pg_reload_conf only signals the postmaster; it re-reads the file, then signals
        # every backend (the pool's too). A new session that sees the setting on means
        # the postmaster got that far. (CI wrote through once before it had.)
        await wait_until(lambda: _fresh_session_is_read_only(pg_pair, dsn), within=30,
                         every=0.05)
        with pytest.raises(StorageError, match="ReadOnlySQLTransactionError"):
            await store.create("through the fenced connection")
        with pytest.raises(StorageError, match=r"turned read-only|no server fits"):
            await store.create("on a new connection to the fenced server")
        await asyncio.to_thread(pg_pair.promote)
        await _write_until_it_lands(store, "after the promotion")
        assert await _server_port(pool) == pg_pair.standby.port
        names = {t.name for t in await store.list_tenants()}
        assert names == {"before the fence", "after the promotion"}
    finally:
        await admin.close()
        await pool.close()


async def _fresh_session_is_read_only(pair: EmbeddedPostgresPair, dsn: str) -> bool:
    conn = await asyncpg.connect(single_host(pair, dsn, standby=False))
    try:
        return bool(await conn.fetchval("SHOW default_transaction_read_only") == "on")
    finally:
        await conn.close()


@contextlib.contextmanager
def _silent_listener() -> Iterator[int]:
    """A port whose kernel completes the TCP handshake but whose server never says a word:
    what a host that is gone behind a load balancer, or a hung server, looks like."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield int(listener.getsockname()[1])


async def test_a_silent_first_host_does_not_use_up_the_connect_timeout(admin_dsn: str) -> None:
    """Each host gets connect_timeout of its own (libpq's meaning). asyncpg alone spends
    one timeout on all hosts together, so the silent first host used it up and the good
    second one was never tried (asyncpg issue 1155)."""
    real = admin_dsn.split("@", 1)[1].split("/", 1)[0]
    with _silent_listener() as silent:
        dsn = admin_dsn.replace(real, f"127.0.0.1:{silent},{real}") + "?connect_timeout=1"
        with pytest.raises(TimeoutError):
            await asyncpg.connect(dsn.replace("connect_timeout=1", ""), timeout=2)
        pool = await create_pool(dsn, 1)
        try:
            assert await pool.fetchval("SELECT 1") == 1
        finally:
            await pool.close()


async def test_the_executor_carries_its_results_through_a_failover(
    pg_pair: EmbeddedPostgresPair,
) -> None:
    """40 requests in flight; the primary is killed before their answers come back and
    the standby promoted 2 s later, inside the 10 s lease. Every result is written to the
    new primary, each run delivered once, no lease lost: a failover is an outage to the
    executor, and ends the same way (ADR 0009)."""
    dsn = await ha_database(pg_pair)
    pool = await create_pool(dsn, 10)
    hold = asyncio.Event()
    harness_pool = await create_pool(dsn, 2)
    try:
        async with Sink(behaviour=always(Reply(hold=hold))) as sink:
            async with pool.acquire() as conn:
                schedule = await seed_schedule(conn, await seed_tenant(conn), sink.url,
                                               retry={"max_attempts": 1})
                await seed_due_runs(conn, schedule, 40)
            harness = Harness(pool, sink, LeanDeliverer(TargetGuard(allow_private=True)))
            await harness.deliverer.start()
            try:
                executor, signals, _ = harness.executor(
                    workers=64, batch=64, lease_seconds=10.0, delivery_timeout=8.0)
                async with running(executor):
                    await sink.wait_for(lambda s: len(s.arrivals) == 40, within=30)
                    await asyncio.to_thread(pg_pair.kill_primary)
                    hold.set()  # the answers arrive while there is no primary
                    await sink.wait_for(
                        lambda s: all(a.status is not None for a in s.arrivals), within=10)
                    await asyncio.sleep(2.0)  # the failover's detection time: the fault itself
                    await asyncio.to_thread(pg_pair.promote)

                    async def settled() -> bool:
                        with contextlib.suppress(*_AWAY):
                            return await non_terminal(harness_pool) == 0
                        return False

                    await wait_until(settled, within=60, every=0.2)
            finally:
                await harness.deliverer.close()
            assert await status_counts(harness_pool) == {"succeeded": 40}
            assert sink.duplicates == 0 and len(sink.arrivals) == 40
            assert signals.lost.items == []
            assert await harness_pool.fetchval("SELECT count(*) FROM run_attempt") == 40
            assert await _server_port(harness_pool) == pg_pair.standby.port
    finally:
        await harness_pool.close()
        await pool.close()


async def test_the_operator_commands_find_the_primary_of_a_multi_host_url(
    pg_pair: EmbeddedPostgresPair,
) -> None:
    """`cronwire migrate` and `tenant create|list` on a URL that lists the standby first."""
    dsn = await ha_database(pg_pair)
    primary, standby = (f"{s.host}:{s.port}" for s in (pg_pair.primary, pg_pair.standby))
    env = clean_env(SCHEDULER_DATABASE_URL=dsn.replace(f"{primary},{standby}",
                                                       f"{standby},{primary}"))
    for command in (["migrate"], ["tenant", "create", "acme"], ["tenant", "list", "--json"]):
        done = await asyncio.to_thread(run_cli, *command, env=env)
        assert done.returncode == 0, done.stderr
    assert "acme" in done.stdout
    pool = await create_pool(single_host(pg_pair, dsn, standby=False), 1)
    try:
        assert await pool.fetchval("SELECT count(*) FROM tenant WHERE name = 'acme'") == 1
    finally:
        await pool.close()


async def test_the_load_test_runs_on_a_multi_host_url(
    pg_pair: EmbeddedPostgresPair, tmp_path: Path
) -> None:
    """`cronwire loadtest` against a pair the user runs (the URL lists the standby first):
    its database, its replicas and its counts all on the primary."""
    primary, standby = (f"{s.host}:{s.port}" for s in (pg_pair.primary, pg_pair.standby))
    env = clean_env(SCHEDULER_DATABASE_URL=pg_pair.dsn().replace(f"{primary},{standby}",
                                                                 f"{standby},{primary}"))
    done = await asyncio.to_thread(
        run_cli, "loadtest", "--schedules", "20", "--duration", "3", "--replicas", "2",
        "--out", str(tmp_path / "loadtest"), env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["planned"] > 0 and summary["lost"] == 0
    assert summary["delivered"] == summary["planned"]
