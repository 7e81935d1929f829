"""Trace identity of a run, and what a span may say about a target (pure, no I/O).

One trace per run, on every replica, with nothing stored: the trace id, the run's root
span id and each attempt's span id are hashes of the run id. (Not the run id's own bits:
a uuid5 has fixed version and variant bits where a ratio sampler reads its randomness,
so "1% of runs" would have sampled none or every one.) So the replica that makes attempt 2 joins the trace the
replica that made attempt 1 started, and the sampling decision (a ratio sampler decides
by trace id) is the same everywhere without anyone telling anyone (ADR 0035).
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit
from uuid import UUID

REDACTED = "REDACTED"


_MASK64 = (1 << 64) - 1


def run_trace_ids(run_id: UUID) -> tuple[int, int, int]:
    """(trace id, root span id, attempt key) of a run, from one 32-byte BLAKE2b of its id
    (from bytes: ``str(uuid)`` alone cost more than the hash). The attempt key seeds every
    attempt's span id (:func:`attempt_span_of`), so a run costs one hash, not one per id."""
    digest = int.from_bytes(hashlib.blake2b(b"cronwire-run" + run_id.bytes,
                                            digest_size=32).digest())
    return (digest >> 128) or 1, ((digest >> 64) & _MASK64) or 1, digest & _MASK64


def attempt_span_of(attempt_key: int, attempt: int, lease_generation: int) -> int:
    """An attempt's span id from the run's attempt key: a splitmix64 finaliser over the key
    and (attempt, generation), so distinct attempts of a run get unrelated, non-zero ids.
    The lease generation tells apart two sends of one attempt number (an expired lease
    whose request never started is leased again under the same number)."""
    z = (attempt_key + 0x9E3779B97F4A7C15 * ((attempt << 32) + lease_generation + 1)) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) or 1


def run_trace_id(run_id: UUID) -> int:
    """The 128-bit trace id of the run's trace, uniformly random-looking in every bit."""
    return run_trace_ids(run_id)[0]


def run_root_span_id(run_id: UUID) -> int:
    """The span id of the run's root span (``cronwire.run``), which every attempt span of
    the run names as its parent before the root itself is exported (at the terminal write)."""
    return run_trace_ids(run_id)[1]


def attempt_span_id(run_id: UUID, attempt: int, lease_generation: int) -> int:
    """The span id of one attempt's HTTP client span, known before the request leaves (it
    goes into ``traceparent``)."""
    return attempt_span_of(run_trace_ids(run_id)[2], attempt, lease_generation)


def traceparent(trace_id: int, span_id: int, sampled: bool) -> str:
    """The W3C Trace Context header value, version 00."""
    return f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}"


def redacted_url(url: str) -> str:
    """``url.full`` of an exported span: ``scheme://host:port``, the first path segment,
    and every later segment replaced by ``REDACTED``; no credentials, query or fragment.

    A span goes to the operator's trace backend, which no tenant's secret may reach:
    Slack and Discord webhooks carry theirs in the path
    (``https://hooks.slack.com:443/services/REDACTED/REDACTED/REDACTED``), and any query
    parameter may hold one, even in its name. An empty segment (``/a//b/``) holds nothing
    and stays empty. Unparseable: just ``REDACTED``."""
    try:
        parts = urlsplit(url)
        host, port = server_of(url)
    except ValueError:
        return REDACTED
    if not parts.scheme or not host:
        return REDACTED
    origin = f"{parts.scheme.lower()}://{f'[{host}]' if ':' in host else host}"
    if port is not None:
        origin += f":{port}"
    first, *rest = parts.path.split("/")[1:] or [""]
    tail = "".join(f"/{REDACTED if segment else ''}" for segment in rest)
    return f"{origin}/{first}{tail}" if parts.path else origin


def server_of(url: str) -> tuple[str | None, int | None]:
    """``server.address`` and ``server.port`` of a target URL (None when unparseable)."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
        return parts.hostname, port
    except ValueError:
        return None, None
