"""Sealed secrets' ports (ADR 0061): the box services seal and open tenant
secrets with, the key ring that wraps data keys, and where wrapped data keys are stored."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol
from uuid import UUID

from cronwire.domain.secrets import DataKeyRecord


class SecretBox(Protocol):
    """Seals a tenant's secrets at rest: authenticated encryption under the tenant's own
    data key, bound to ``context`` (the owning row and field) and the tenant id, so a value
    moved anywhere else does not open. Every failure to open is a
    :class:`cronwire.domain.secrets.SecretError`, never a wrong plaintext."""

    async def seal(self, tenant_id: UUID, plaintext: str, context: str) -> str:
        """The sealed text of ``plaintext`` (creates the tenant's data key on first use).
        Raises StorageError when the data key cannot be read or stored."""
        ...

    async def unseal(self, tenant_id: UUID, sealed: str, context: str) -> str:
        """The plaintext of a value sealed for this tenant and context. A value not in the
        sealed format is returned as it is (written before sealing began; the start-up
        step seals those). Raises SecretError if it does not open."""
        ...

    async def load(self, tenant_ids: Collection[UUID]) -> None:
        """Bring these tenants' data keys into memory, one round trip for those not yet
        there, so :meth:`unseal_loaded` needs no I/O (the claim's hot path)."""
        ...

    def unseal_loaded(self, tenant_id: UUID, sealed: str, context: str) -> str:
        """:meth:`unseal` without I/O, for tenants passed to :meth:`load` before. Raises
        SecretError if the value does not open or the tenant has no data key."""
        ...


class KeyWrapper(Protocol):
    """The root of trust: wraps and unwraps data keys. The key ring of
    SCHEDULER_SECRET_KEYS today; a KMS (Encrypt/Decrypt of the 32-byte data key) later.
    Called only when a data key is made, first loaded, or re-wrapped, never per value."""

    @property
    def sealing_key_id(self) -> str:
        """The key new data keys are wrapped under (the ring's first)."""
        ...

    @property
    def key_ids(self) -> Sequence[str]:
        """Every key that can unwrap, the sealing one first."""
        ...

    async def wrap(self, data_key: bytes, context: str) -> tuple[str, bytes]:
        """(key id, wrapped bytes) of ``data_key`` under the sealing key, bound to ``context``."""
        ...

    async def unwrap(self, key_id: str, wrapped: bytes, context: str) -> bytes:
        """The data key; SecretError if ``key_id`` is not in the ring or it does not open."""
        ...


class DataKeyStore(Protocol):
    """Where wrapped data keys live (one per tenant). Raises StorageError on failure."""

    async def for_tenants(self, tenant_ids: Collection[UUID]) -> Sequence[DataKeyRecord]:
        """The data keys of these tenants (absent tenants have none yet)."""
        ...

    async def insert_if_absent(self, record: DataKeyRecord) -> DataKeyRecord:
        """Store ``record`` unless the tenant has a data key already; the one that stays."""
        ...

    async def count_by_key_id(self) -> Mapping[str, int]:
        """How many data keys each key ring entry wraps."""
        ...

    async def not_wrapped_by(self, key_id: str, after: UUID | None,
                             limit: int) -> Sequence[DataKeyRecord]:
        """Up to ``limit`` data keys wrapped by another key than ``key_id``, by id after
        ``after`` (a keyset walk that a restart resumes)."""
        ...

    async def rewrap(self, rewrapped: Sequence[tuple[DataKeyRecord, DataKeyRecord]]) -> int:
        """Replace each (old, new) in one statement where the stored key id is still the
        old one (a concurrent rotation wins, nothing is lost); how many were replaced."""
        ...

    async def one_per_key_id(self) -> Sequence[DataKeyRecord]:
        """One data key of every key id in use: what start-up unwraps to prove the ring."""
        ...
