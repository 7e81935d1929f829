"""Which stored fields are sealed and how (ADR 0061): the signing secrets, every
``target.headers`` value and the client certificate's key of a schedule, each bound to its
row and field (the certificate itself is public and stays in clear). The stores seal on
write and open on read through a :class:`cronwire.ports.SecretBox`; the claim opens with
the data keys loaded beforehand, without I/O (:func:`open_claimed`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from cronwire.domain.model import Target
from cronwire.domain.schedules import ScheduleRecord
from cronwire.domain.secrets import (
    schedule_client_key_context,
    schedule_header_context,
    schedule_secret_context,
)
from cronwire.ports.secrets import SecretBox


async def sealed_target(box: SecretBox, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                        document: Mapping[str, Any]) -> dict[str, Any]:
    """The target document to store: each header value sealed under its name, the client
    key under its own field."""
    headers = document.get("headers") or {}
    sealed = {name: await box.seal(tenant_id, str(value),
                                   schedule_header_context(schedule_id, name))
              for name, value in headers.items()}
    stored = {**document, "headers": sealed}
    tls = document.get("tls")
    if tls is not None:
        stored["tls"] = {**tls, "client_key": await box.seal(
            tenant_id, tls["client_key"], schedule_client_key_context(schedule_id))}
    return stored


async def sealed_secret(box: SecretBox, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                        secret: str) -> str:
    return await box.seal(tenant_id, secret, schedule_secret_context(schedule_id))


async def opened_stored_target(box: SecretBox, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                               target: Target) -> Target:
    """A stored target (a row's or a revision's) with its header values and client key in
    clear."""
    headers = {name: await box.unseal(tenant_id, value, schedule_header_context(schedule_id, name))
               for name, value in target.headers.items()}
    tls = target.tls
    if tls is not None:
        tls = replace(tls, key=await box.unseal(tenant_id, tls.key,
                                                schedule_client_key_context(schedule_id)))
    return replace(target, headers=headers, tls=tls)


async def opened_record(box: SecretBox, record: ScheduleRecord) -> ScheduleRecord:
    """The record with its header values and signing secret in clear (for the service
    layer: a PATCH keeps a header sent back masked, a create shows the secret once)."""
    target = await opened_stored_target(box, record.tenant_id, record.id, record.spec.target)
    secret = await box.unseal(record.tenant_id, record.signing_secret,
                              schedule_secret_context(record.id))
    return replace(record, signing_secret=secret, spec=replace(record.spec, target=target))


def has_sealed_members(target: Target) -> bool:
    """Whether a stored target carries anything sealed (opened per schedule)."""
    return bool(target.headers) or target.tls is not None


def opened_target(box: SecretBox, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                  target: Target) -> Target:
    """A claimed run's target with header values and the client key in clear (data keys
    loaded already)."""
    headers = {name: box.unseal_loaded(tenant_id, value,
                                       schedule_header_context(schedule_id, name))
               for name, value in target.headers.items()}
    tls = target.tls
    if tls is not None:
        tls = replace(tls, key=box.unseal_loaded(tenant_id, tls.key,
                                                 schedule_client_key_context(schedule_id)))
    return replace(target, headers=headers, tls=tls)


def opened_secrets(box: SecretBox, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                   sealed: tuple[str | None, str | None]) -> tuple[str, ...]:
    context = schedule_secret_context(schedule_id)
    current, previous = sealed
    if not current:
        return ()
    first = box.unseal_loaded(tenant_id, current, context)
    if not previous:
        return (first,)
    return (first, box.unseal_loaded(tenant_id, previous, context))
