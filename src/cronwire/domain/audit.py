"""What the audit log says about a change, computed purely: a field-by-field diff of two
documents, with sealed values shown as ``"***"``.

A change whose diff is empty changed nothing: the stores write no audit row and bump no
version for it (a PUT of the same body again relies on that). Header values
and secrets are compared in clear and shown sealed, so a changed header reads
``["***", "***"]`` and a removed one ``["***", null]``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronwire.domain.access import Change
from cronwire.domain.keyset import HistoryPosition

SEALED = "***"
# Dotted field names whose values are secrets (prefixes: every header under target.headers,
# the client certificate's key).
SEALED_PREFIXES = ("target.headers.", "target.tls.client_key", "signing_secret",
                   "previous_secret")
Changes = dict[str, list[Any]]  # field -> [before, after]


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One row of the audit log, before it is written."""

    change: Change
    action: str  # schedule.create, token.revoke, ...
    object_type: str  # schedule, run, token, alert_destination
    object_id: str | None
    changes: Changes


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One row of the audit log as read back."""

    id: uuid.UUID
    at: datetime
    actor: dict[str, Any]
    action: str
    object_type: str
    object_id: str | None
    request_id: str | None
    client_address: str | None
    changes: Changes


@dataclass(frozen=True, slots=True)
class AuditQuery:
    limit: int
    since: datetime | None = None
    until: datetime | None = None
    object_id: str | None = None
    action: str | None = None
    before: HistoryPosition | None = None  # keyset: (at, id) of the last row seen


def flatten(document: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted names: {"target": {"url": u}} -> {"target.url": u}."""
    flat: dict[str, Any] = {}
    for name, value in document.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, key + "."))
        elif isinstance(value, Mapping):
            continue  # an empty mapping is the absence of its members
        else:
            flat[key] = value
    return flat


def is_sealed(field: str) -> bool:
    return field.startswith(SEALED_PREFIXES)


def sealed(field: str, value: Any) -> Any:
    return SEALED if value is not None and is_sealed(field) else value


def diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> Changes:
    """{field: [before, after]} for every dotted field that differs, sealed values
    masked; ``None`` stands for an object that did not exist (a create) or no longer
    does (a delete)."""
    old, new = flatten(before or {}), flatten(after or {})
    return {key: [sealed(key, old.get(key)), sealed(key, new.get(key))]
            for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)}


@dataclass(frozen=True, slots=True)
class Revision:
    """One version of a schedule: when, by whom, what changed to make it."""

    version: int
    at: datetime
    actor: dict[str, Any]
    changes: Changes
