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
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit
from uuid import UUID

REDACTED = "REDACTED"


def _hashed(size: int, tag: bytes, run_id: UUID, *numbers: int) -> int:
    # From bytes, not text: str(uuid) alone cost more than the hash (~1 µs a call).
    data = tag + run_id.bytes + b"".join(n.to_bytes(8, "big", signed=True) for n in numbers)
    return int.from_bytes(hashlib.blake2b(data, digest_size=size).digest()) or 1  # 0 is invalid


def run_trace_id(run_id: UUID) -> int:
    """The 128-bit trace id of the run's trace, uniformly random-looking in every bit."""
    return _hashed(16, b"trace", run_id)


def run_root_span_id(run_id: UUID) -> int:
    """The span id of the run's root span (``cronwire.run``), which every attempt span of
    the run names as its parent before the root itself is exported (at the terminal write)."""
    return _hashed(8, b"run", run_id)


def attempt_span_id(run_id: UUID, attempt: int, lease_generation: int) -> int:
    """The span id of one attempt's HTTP client span, known before the request leaves (it
    goes into ``traceparent``). The lease generation tells apart two sends of one attempt
    number (an expired lease whose request never started is leased again, same number)."""
    return _hashed(8, b"attempt", run_id, attempt, lease_generation)


def traceparent(trace_id: int, span_id: int, sampled: bool) -> str:
    """The W3C Trace Context header value, version 00."""
    return f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}"


def redacted_url(url: str) -> str:
    """``url.full`` as the OTel HTTP conventions want it: credentials replaced, and here
    every query value too (a tenant's URL may carry a token in any parameter)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{REDACTED}:{REDACTED}@{netloc.rpartition('@')[2]}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode([(name, REDACTED) for name, _ in pairs], safe="")
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return REDACTED


def server_of(url: str) -> tuple[str | None, int | None]:
    """``server.address`` and ``server.port`` of a target URL (None when unparseable)."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
        return parts.hostname, port
    except ValueError:
        return None, None
