"""The SecretBox on AES-256-GCM with envelope encryption (ADR 0061): each tenant's values
are sealed with the tenant's own random data key; data keys are stored wrapped by a
:class:`cronwire.ports.KeyWrapper` (the key ring) in a :class:`cronwire.ports.DataKeyStore`
and kept unwrapped in memory once loaded (they never change: a key ring rotation re-wraps
them, it does not replace them). Sealed format: :mod:`cronwire.domain.secrets`."""

from __future__ import annotations

import binascii
import logging
import os
import uuid
from collections.abc import Collection

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from cronwire.domain.secrets import SEALED_PREFIX, DataKeyRecord, SecretError, data_key_context
from cronwire.ports.secrets import DataKeyStore, KeyWrapper

log = logging.getLogger(__name__)
NONCE_BYTES = 12
DATA_KEY_BYTES = 32
_REF = len(SEALED_PREFIX)  # where the data key id starts
_BODY = _REF + 33  # where the base64 starts, after the id's 32 hex digits and a colon


def _b64(raw: bytes) -> str:
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


def _unb64(text: str) -> bytes:
    # binascii directly: base64.b64decode's argument checks cost more than the decryption.
    return binascii.a2b_base64(text, strict_mode=True)


class _DataKey:
    __slots__ = ("aad_prefix", "cipher", "id", "ref")

    def __init__(self, key_id: uuid.UUID, key: bytes, tenant_id: uuid.UUID) -> None:
        # The tenant part of every associated data, made once (str(UUID) is Python code).
        self.aad_prefix = f"{tenant_id}/".encode()
        self.id = key_id
        self.ref = key_id.hex
        self.cipher = AESGCM(key)


class EnvelopeSecretBox:
    def __init__(self, wrapper: KeyWrapper, store: DataKeyStore) -> None:
        self._wrapper = wrapper
        self._store = store
        self._keys: dict[uuid.UUID, _DataKey] = {}  # by tenant id

    async def seal(self, tenant_id: uuid.UUID, plaintext: str, context: str) -> str:
        key = await self._key_for_sealing(tenant_id)
        nonce = os.urandom(NONCE_BYTES)
        sealed = key.cipher.encrypt(nonce, plaintext.encode(), key.aad_prefix + context.encode())
        return f"{SEALED_PREFIX}{key.ref}:{_b64(nonce + sealed)}"

    async def unseal(self, tenant_id: uuid.UUID, sealed: str, context: str) -> str:
        if not sealed.startswith(SEALED_PREFIX):
            return sealed
        await self.load((tenant_id,))
        return self.unseal_loaded(tenant_id, sealed, context)

    async def load(self, tenant_ids: Collection[uuid.UUID]) -> None:
        missing = [t for t in set(tenant_ids) if t not in self._keys]
        if missing:
            for record in await self._store.for_tenants(missing):
                try:
                    await self._remember(record)
                except SecretError as exc:
                    # One tenant's data key that does not open (altered in the database)
                    # must not stop a claim shared by every tenant: its values stay shut
                    # (unseal_loaded refuses them) and the others are opened.
                    log.error("tenant %s: its data key does not open, so none of its "
                              "sealed values can be: %s", record.tenant_id, exc)

    def unseal_loaded(self, tenant_id: uuid.UUID, sealed: str, context: str) -> str:
        if not sealed.startswith(SEALED_PREFIX):
            return sealed
        key = self._keys.get(tenant_id)
        if key is None:
            raise SecretError(f"tenant {tenant_id} has no data key to open a sealed value")
        # cws1:<32 hex>:<base64>, sliced at fixed places (split made a list per value)
        if sealed[_REF:_BODY - 1] != key.ref or sealed[_BODY - 1:_BODY] != ":":
            raise SecretError(f"a sealed value of {context} names another data key")
        try:
            raw = _unb64(sealed[_BODY:])
            plain = key.cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:],
                                       key.aad_prefix + context.encode())
            return plain.decode()
        except (ValueError, binascii.Error, InvalidTag, UnicodeDecodeError):
            raise SecretError(f"a sealed value of {context} does not open "
                              "(moved from another row or tenant, or altered)") from None

    async def _key_for_sealing(self, tenant_id: uuid.UUID) -> _DataKey:
        await self.load((tenant_id,))
        key = self._keys.get(tenant_id)
        if key is not None:
            return key
        record = DataKeyRecord(uuid.uuid4(), tenant_id, "", b"")
        data_key = os.urandom(DATA_KEY_BYTES)
        key_id, wrapped = await self._wrapper.wrap(data_key, data_key_context(record))
        stored = await self._store.insert_if_absent(
            DataKeyRecord(record.id, tenant_id, key_id, wrapped))
        return await self._remember(stored)  # another replica's, if it was first

    async def _remember(self, record: DataKeyRecord) -> _DataKey:
        raw = await self._wrapper.unwrap(record.key_id, record.wrapped, data_key_context(record))
        key = _DataKey(record.id, raw, record.tenant_id)
        self._keys[record.tenant_id] = key
        return key
