"""The JSON documents a schedule's target and retry policy are stored as (one codec each).

``schedule.target`` and ``schedule.retry`` are jsonb columns; everything that writes them
(the schedule store, the load test and chaos seeding) and everything that reads them (the
schedule store, the claims) goes through these four functions, so the document shape
lives in one place. Pure: no I/O, no JSON parsing (the caller's driver or ``json``
turns text into the mapping).

Reading is lenient on purpose. The API never writes a malformed document, but a claim
must not crash on one hand-edited row: a target without a URL still becomes a Target
(whose empty URL then fails the attempt with evidence), and a retry document with a
missing or unusable value falls back to :class:`RetryPolicy`'s defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cronwire.domain.client_tls import tls_from_document, tls_to_document
from cronwire.domain.model import MAX_ATTEMPTS, RetryPolicy, Target


def target_to_document(target: Target) -> dict[str, Any]:
    document: dict[str, Any] = {"url": target.url, "method": target.method,
                                "headers": dict(target.headers), "body": target.body}
    if target.tls is not None:  # absent otherwise: most targets' text stays as it was
        document["tls"] = tls_to_document(target.tls)
    return document


def retry_to_document(retry: RetryPolicy) -> dict[str, Any]:
    return {"max_attempts": retry.max_attempts,
            "initial_backoff_seconds": retry.initial_backoff_seconds,
            "max_backoff_seconds": retry.max_backoff_seconds}


def target_from_document(doc: Mapping[str, Any] | None) -> Target:
    """The target a stored document describes; a malformed one gives an empty URL."""
    doc = doc if isinstance(doc, Mapping) else {}
    headers = doc.get("headers")
    headers = headers if isinstance(headers, Mapping) else {}
    return Target(
        url=str(doc.get("url") or ""),
        method=str(doc.get("method") or "POST").upper(),
        headers={str(k): str(v) for k, v in headers.items()},
        body=None if doc.get("body") is None else str(doc["body"]),
        tls=tls_from_document(doc.get("tls")),
    )


def retry_from_document(doc: Mapping[str, Any] | None) -> RetryPolicy:
    """The policy a stored document describes: max_attempts clamped to 1..MAX_ATTEMPTS,
    a missing value defaulted, an unusable document the default policy."""
    defaults = RetryPolicy()
    doc = doc if isinstance(doc, Mapping) else {}
    try:
        return RetryPolicy(
            max_attempts=max(
                1, min(MAX_ATTEMPTS, int(doc.get("max_attempts") or defaults.max_attempts))
            ),
            initial_backoff_seconds=float(
                doc.get("initial_backoff_seconds", defaults.initial_backoff_seconds)
            ),
            max_backoff_seconds=float(
                doc.get("max_backoff_seconds", defaults.max_backoff_seconds)
            ),
        )
    except (TypeError, ValueError):
        return defaults
