"""The key ring of SCHEDULER_SECRET_KEYS: local 32-byte AES-256-GCM keys that wrap the
tenants' data keys (a :class:`cronwire.ports.KeyWrapper`). The first seals, every one
opens, so a new key goes first and the old one stays until `cronwire keys rotate` is done."""

from __future__ import annotations

import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from cronwire.domain.secrets import SecretError

NONCE_BYTES = 12
KEY_BYTES = 32


class KeyRing:
    def __init__(self, entries: Sequence[tuple[str, bytes]]) -> None:
        if not entries:
            raise ValueError("a key ring needs at least one key")
        for key_id, key in entries:
            if len(key) != KEY_BYTES:
                raise ValueError(f"key {key_id!r} is {len(key)} bytes, not {KEY_BYTES}")
        self._ids = tuple(key_id for key_id, _ in entries)
        self._ciphers = {key_id: AESGCM(key) for key_id, key in entries}

    @property
    def sealing_key_id(self) -> str:
        return self._ids[0]

    @property
    def key_ids(self) -> Sequence[str]:
        return self._ids

    async def wrap(self, data_key: bytes, context: str) -> tuple[str, bytes]:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self._ids[0]].encrypt(nonce, data_key, context.encode())
        return self._ids[0], nonce + sealed

    async def unwrap(self, key_id: str, wrapped: bytes, context: str) -> bytes:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise SecretError(
                f"a data key is wrapped by key {key_id!r}, which SCHEDULER_SECRET_KEYS does "
                f"not hold (it holds {', '.join(self._ids)})")
        try:
            return cipher.decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], context.encode())
        except InvalidTag:
            raise SecretError(
                f"key {key_id!r} of SCHEDULER_SECRET_KEYS does not open a data key wrapped "
                "under that id: the key's bytes are not the ones it was wrapped with") from None
