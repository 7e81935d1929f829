"""`cronwire keys rotate` on N tenants' data keys (ADR 0061): the time to re-wrap
every one under a new first key, the same code the command runs (rotate_data_keys, batches
of 1,000), on a real Postgres with fsync on.

N tenants each get a data key wrapped under the old key (made the way the envelope box
makes them, inserted in bulk), then the ring becomes (new, old) and every key is re-wrapped
and checked: all under the new key, and a sample opens with the new key alone. Prints one
JSON line.

    python benchmarks/bench_key_rotation.py [--tenants 100000] [--dsn ...]

Without --dsn an embedded Postgres with durable settings (fsync on) runs in a temp dir.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid

from cronwire.adapters.crypto.key_ring import KeyRing
from cronwire.adapters.embedded.postgres import throwaway_cluster
from cronwire.adapters.postgres.data_key_store import PostgresDataKeyStore
from cronwire.bootstrap.factories import fresh_database, open_pool
from cronwire.domain.secrets import DataKeyRecord, data_key_context
from cronwire.loadtest.setup import database_name
from cronwire.service.secret_keys import key_status, prove_key_ring, rotate_data_keys

OLD = ("old", os.urandom(32))
NEW = ("new", os.urandom(32))


async def main_async(tenants: int, admin_dsn: str) -> dict[str, object]:
    dsn = await fresh_database(admin_dsn, database_name("keyrotation"))
    pool = await open_pool(dsn, 4)
    try:
        old_ring = KeyRing([OLD])
        ids = [uuid.uuid4() for _ in range(tenants)]
        keys = [uuid.uuid4() for _ in range(tenants)]
        wrapped = [(await old_ring.wrap(os.urandom(32), data_key_context(
            DataKeyRecord(key, tenant, "", b""))))[1] for tenant, key in zip(ids, keys, strict=True)]
        await pool.execute("INSERT INTO tenant (id, name) SELECT id, 't' FROM unnest($1::uuid[]) AS id",
                           ids)
        await pool.execute(
            "INSERT INTO secret_data_key (id, tenant_id, key_id, wrapped) "
            "SELECT k, t, 'old', w FROM unnest($1::uuid[], $2::uuid[], $3::bytea[]) AS u(k, t, w)",
            keys, ids, wrapped)
        store = PostgresDataKeyStore(pool)
        both = KeyRing([NEW, OLD])
        started = time.perf_counter()
        rewrapped = await rotate_data_keys(both, store)
        seconds = time.perf_counter() - started
        counts = dict(await key_status(store))
        await prove_key_ring(KeyRing([NEW]), store)
        return {"tenants": tenants, "rewrapped": rewrapped, "seconds": round(seconds, 2),
                "per_second": round(rewrapped / seconds), "after": counts}
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=100_000)
    parser.add_argument("--dsn", help="an admin DSN of a Postgres to use instead of a throwaway one")
    args = parser.parse_args()
    if args.dsn:
        report = asyncio.run(main_async(args.tenants, args.dsn))
    else:
        with throwaway_cluster("cronwire-keyrotation-") as server:
            report = asyncio.run(main_async(args.tenants, server.dsn))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
