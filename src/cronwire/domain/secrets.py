"""Sealed secrets (ADR 0061): the names of what is sealed and the format's shape. Pure.

A sealed value is text, self-describing and safe to store anywhere a string goes (a text
column, a jsonb string)::

    cws1:<data key id, 32 hex>:<base64 of the 12-byte nonce, the ciphertext and its tag>

``cws1`` names the format (cronwire sealed, version 1: AES-256-GCM under the tenant's data
key). The associated data binds it to its place: the tenant, the owning row and the field,
so a sealed value copied to another row, field or tenant does not open.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

SEALED_PREFIX = "cws1:"
# What a read shows for every target.headers value; a PATCH sending it keeps the stored value.
MASK = "***"


class SecretError(Exception):
    """A sealed value does not open (wrong key ring, tampered or moved value), or a data key
    cannot be unwrapped. Never answered with a guess: the caller fails the operation."""


def is_sealed(value: str) -> bool:
    return value.startswith(SEALED_PREFIX)


@dataclass(frozen=True, slots=True)
class DataKeyRecord:
    """A tenant's data key as stored: wrapped by the key ring entry ``key_id``."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    key_id: str
    wrapped: bytes = field(repr=False)


# Row ids appear as .hex in the contexts: str(UUID) is Python code three times slower, and
# the claim builds a context for every schedule it opens.


def schedule_secret_context(schedule_id: uuid.UUID) -> str:
    """Current and previous signing secret share it: a rotation moves the current one into
    the previous slot of the same row, in SQL, without opening it."""
    return f"schedule/{schedule_id.hex}/signing_secret"


def schedule_header_context(schedule_id: uuid.UUID, name: str) -> str:
    return f"schedule/{schedule_id.hex}/header/{name.lower()}"


def schedule_client_key_context(schedule_id: uuid.UUID) -> str:
    """The private key of the target's client certificate (mTLS)."""
    return f"schedule/{schedule_id.hex}/client_key"


def alert_secret_context() -> str:
    """One alert destination per tenant: the tenant id (in every associated data) names it."""
    return "tenant_alert_destination/signing_secret"


def data_key_context(record: DataKeyRecord) -> str:
    """What a wrapped data key is bound to: swapping two tenants' rows does not open."""
    return f"cronwire/data-key/{record.tenant_id}/{record.id}"
