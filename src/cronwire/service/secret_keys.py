"""The key ring's upkeep (ADR 0061): prove it at start-up, report which key wraps how many
data keys, and re-wrap every data key under the first key (`cronwire keys rotate`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from uuid import UUID

from cronwire.domain.errors import ConfigError
from cronwire.domain.secrets import DataKeyRecord, SecretError, data_key_context
from cronwire.ports.secrets import DataKeyStore, KeyWrapper

log = logging.getLogger(__name__)
ROTATE_BATCH = 1000


async def prove_key_ring(wrapper: KeyWrapper, store: DataKeyStore) -> None:
    """Unwrap one data key of every key id in use; a key ring that lacks one, or holds
    other bytes under its id, is a ConfigError naming SCHEDULER_SECRET_KEYS, raised before
    anything is delivered (never a request signed with a secret that did not open)."""
    for record in await store.one_per_key_id():
        try:
            await wrapper.unwrap(record.key_id, record.wrapped, data_key_context(record))
        except SecretError as exc:
            raise ConfigError(f"SCHEDULER_SECRET_KEYS: {exc}") from None


async def key_status(store: DataKeyStore) -> Mapping[str, int]:
    return await store.count_by_key_id()


async def rotate_data_keys(wrapper: KeyWrapper, store: DataKeyStore,
                           batch: int = ROTATE_BATCH) -> int:
    """Re-wrap every data key not under the sealing key, a batch per statement. Online:
    the data keys themselves do not change, so sealed values and replicas' memory stay
    valid. Idempotent and resumable: a key already re-wrapped is not read again, and an
    interrupted run is finished by the next. Returns how many were re-wrapped."""
    sealing = wrapper.sealing_key_id
    after: UUID | None = None
    done = 0
    while True:
        olds = await store.not_wrapped_by(sealing, after, batch)
        if not olds:
            return done
        pairs: list[tuple[DataKeyRecord, DataKeyRecord]] = []
        for old in olds:
            context = data_key_context(old)
            raw = await wrapper.unwrap(old.key_id, old.wrapped, context)
            key_id, wrapped = await wrapper.wrap(raw, context)
            pairs.append((old, replace(old, key_id=key_id, wrapped=wrapped)))
        done += await store.rewrap(pairs)
        after = olds[-1].id
        log.info("re-wrapped %d data keys under %s so far", done, sealing)
