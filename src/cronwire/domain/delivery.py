"""The delivery request: what is sent for one attempt of a run, how it is signed,
and how the answer is classified.

Pure apart from :func:`new_signing_secret` (randomness); the deliverers pass the
User-Agent (cronwire.version.user_agent). Clocks are
the caller's: timestamps are passed in.
"""

from __future__ import annotations

import base64
import codecs
import functools
import hashlib
import hmac
import math
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from uuid import UUID

from cronwire.domain.client_tls import ClientTls
from cronwire.domain.errors import InvalidTarget

EXCERPT_BYTES = 1024
ERROR_CHARS = 500
SECRET_PREFIX = "whsec_"

# Headers the HTTP client computes from the request itself. Letting a tenant
# set them could desynchronise message framing (request smuggling) or
# misroute the request, so tenant values for these are dropped.
_CLIENT_OWNED = frozenset({"host", "content-length", "transfer-encoding", "connection",
                           "keep-alive", "upgrade", "te", "trailer", "proxy-authorization",
                           "proxy-connection"})
# W3C Trace Context (any case). With tracing on, the attempt's context is ours alone: our
# traceparent replaces the tenant's, and a tenant's tracestate (vendor data of a trace it
# does not own) does not ride along with it. With tracing off, both pass as given.
_TRACE_CONTEXT = frozenset({"traceparent", "tracestate"})
_CLIENT_OR_TRACE_OWNED = _CLIENT_OWNED | _TRACE_CONTEXT
_RETRYABLE_STATUS = frozenset({408, 425, 429})
_DELTA_SECONDS = re.compile(r"[+-]?\d{1,12}(\.\d{1,9})?")


class Outcome(StrEnum):
    SUCCESS = "success"
    HTTP_ERROR = "http_error"
    TIMEOUT = "timeout"
    CONNECTION_ERROR = "connection_error"
    BLOCKED = "blocked"  # refused by the address policy at delivery; permanent


@dataclass(slots=True, unsafe_hash=True)  # per-run value, never mutated: see ClaimedRun
class DeliveryRequest:
    run_id: UUID
    schedule_id: UUID
    # Whose request this is: a deliverer never lets two tenants share a connection, so
    # nothing one tenant's receiver sends is ever read as another tenant's answer.
    tenant_id: UUID
    idempotency_key: str
    scheduled_for: datetime
    attempt: int
    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes
    signing_secrets: tuple[str, ...]
    timeout_seconds: float
    # The time.monotonic() instant after which the request's bytes must not be written;
    # past it the deliverer raises RequestNotSent instead of sending (None: no limit).
    # Checked right before the write, it closes the window between the executor's "lease
    # too old to send" check and the write (waiting for a pool slot or a connection),
    # during which a stalled process could otherwise wake and send on a lease another
    # replica has taken over. An instant, not a duration: see lease_keeper.send_deadline.
    send_by_monotonic: float | None = None
    # W3C trace context of this attempt (ADR 0035); None when tracing is off: no header.
    traceparent: str | None = None
    # The client certificate and key (in clear) the TLS handshake presents (mTLS).
    client_tls: ClientTls | None = None


@dataclass(slots=True, unsafe_hash=True)  # per-run value, never mutated: see ClaimedRun
class DeliveryResult:
    outcome: Outcome
    status_code: int | None
    error: str | None  # "ClassName: message", at most ERROR_CHARS
    duration_ms: int
    response_excerpt: str | None  # at most EXCERPT_BYTES of the body, utf-8
    retry_after_seconds: float | None
    started_at: datetime
    finished_at: datetime

    @property
    def retryable(self) -> bool:
        """Whether another attempt could plausibly succeed.

        Timeouts, connection errors, 5xx, 408 (request timeout), 425 (too early)
        and 429 (rate limited) describe a receiver that is busy or briefly away.
        Any other 4xx says the request itself is wrong (auth, path, payload) and
        a 3xx points elsewhere; sending the same request again gets the same
        answer, so retrying only adds load. BLOCKED is a policy decision about
        the target address that does not change between attempts, and retrying
        it would hand a DNS-rebinding attacker more tries.
        """
        if self.outcome in (Outcome.TIMEOUT, Outcome.CONNECTION_ERROR):
            return True
        if self.outcome is Outcome.HTTP_ERROR and self.status_code is not None:
            return self.status_code in _RETRYABLE_STATUS or 500 <= self.status_code <= 599
        return False


@functools.lru_cache(maxsize=4096)
def rfc3339_utc(moment: datetime) -> str:
    """``2027-03-28T01:00:00Z``; sub-second digits only when present.

    Memoised: every run of one occurrence shares its instant, and a burst sends the same
    text in every body and header (~2% of an executor's CPU before)."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime; cronwire times are timezone-aware")
    utc = moment.astimezone(UTC)
    spec = "microseconds" if utc.microsecond else "seconds"
    return utc.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def default_body(schedule_id: UUID, run_id: UUID, scheduled_for: datetime, attempt: int) -> bytes:
    """The JSON body sent when the target has no body of its own.

    Formatted directly rather than through json.dumps (~4% of an executor's CPU): UUIDs,
    RFC 3339 text and an int never need escaping, and the bytes are exactly what
    ``json.dumps(document, separators=(",", ":"))`` gives (tested)."""
    return (
        f'{{"schedule_id":"{schedule_id}","run_id":"{run_id}",'
        f'"scheduled_for":"{rfc3339_utc(scheduled_for)}","attempt":{int(attempt)}}}'
    ).encode()


@functools.lru_cache(maxsize=4096)
def _secret_key(secret: str) -> bytes:
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        return base64.b64decode(encoded, validate=True)
    except ValueError:
        raise ValueError("signing secret is not whsec_<base64>") from None


def sign(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """Standard Webhooks ``webhook-signature``: one ``v1,<base64>`` per secret.

    Several secrets sign at once while a secret is being rotated, so receivers
    holding either the old or the new one can verify.
    """
    if not secrets:
        raise ValueError("at least one signing secret is required")
    signed = f"{msg_id}.{timestamp}.".encode() + body
    signatures = []
    for secret in secrets:
        mac = _keyed_hmac(secret).copy()  # the key schedule is computed once per secret
        mac.update(signed)
        signatures.append("v1," + base64.b64encode(mac.digest()).decode("ascii"))
    return " ".join(signatures)


@functools.lru_cache(maxsize=4096)
def _keyed_hmac(secret: str) -> hmac.HMAC:
    return hmac.new(_secret_key(secret), digestmod=hashlib.sha256)


def new_signing_secret() -> str:
    """A fresh ``whsec_`` secret (24 random bytes)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode("ascii")


# When a caller names no User-Agent (the deliverers always do, with the version).
FALLBACK_USER_AGENT = "cronwire"


# Control characters (C0, DEL and C1, U+0085 among them) other than HTAB: no receiver
# should see them raw in a field value (RFC 9110 5.5), and CR/LF would split the head.
HEADER_VALUE_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _check_header(name: str, value: str) -> None:
    if not name or any(ch in name for ch in ":\r\n\0 \t"):
        raise InvalidTarget(f"target.headers: invalid header name {name!r}")
    if HEADER_VALUE_CONTROLS.search(value):
        raise InvalidTarget(f"target.headers: header {name!r} contains a control character")


def delivery_headers(
    req: DeliveryRequest, timestamp: int, *, user_agent: str | None = None
) -> dict[str, str]:
    """Every header of one attempt: the tenant's, then ours (ours win, case-insensitively).

    When the attempt is traced (``req.traceparent``), the tenant's ``traceparent`` and
    ``tracestate`` are dropped: the trace context is ours. Raises InvalidTarget for a
    tenant header that cannot be sent safely.
    """
    ours = {
        "webhook-id": req.idempotency_key,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(req.signing_secrets, req.idempotency_key, timestamp, req.body),
        "x-cronwire-run-id": str(req.run_id),
        "x-cronwire-schedule-id": str(req.schedule_id),
        "x-cronwire-scheduled-for": rfc3339_utc(req.scheduled_for),
        "x-cronwire-attempt": str(req.attempt),
        "user-agent": user_agent or FALLBACK_USER_AGENT,
    }
    if req.traceparent is not None:
        ours["traceparent"] = req.traceparent
    if not req.headers:  # the common case: nothing of the tenant's to check
        return {"content-type": "application/json", **ours}
    headers: dict[str, str] = {}
    dropped = _CLIENT_OWNED if req.traceparent is None else _CLIENT_OR_TRACE_OWNED
    for name, value in req.headers.items():
        _check_header(name, value)
        lowered = name.lower()
        if lowered not in ours and lowered not in dropped:
            headers[name] = value
    if not any(name.lower() == "content-type" for name in headers):
        headers["content-type"] = "application/json"
    headers.update(ours)
    return headers


# A year: a parsed Retry-After stays a finite, ordinary float whatever digits it had.
MAX_RETRY_AFTER_PARSED = 365 * 86_400.0


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date).

    A time in the past or a negative delay gives 0; anything unparseable, None. A delay
    too long to mean anything is cut to MAX_RETRY_AFTER_PARSED (callers cap it further).
    """
    if value is None:
        return None
    text = value.strip()
    if _DELTA_SECONDS.fullmatch(text):
        return min(max(0.0, float(text)), MAX_RETRY_AFTER_PARSED)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # HTTP-dates are GMT
    seconds = (when - now).total_seconds()
    return min(max(0.0, seconds), MAX_RETRY_AFTER_PARSED) if math.isfinite(seconds) else None


def response_excerpt(data: bytes) -> str:
    """At most EXCERPT_BYTES of ``data`` as text, never ending inside a character."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    # final=False keeps an incomplete trailing sequence back instead of
    # turning it into U+FFFD: the cut lands on a character boundary.
    return decoder.decode(data[:EXCERPT_BYTES], final=False)


def error_text(exc: BaseException, detail: str | None = None) -> str:
    """``ClassName: message`` of at most ERROR_CHARS characters. An exception without a
    message says what caused it (httpx's bare ``ReadError`` over a refused TLS handshake
    becomes ``ReadError: SSLError: ... certificate required``)."""
    message = detail if detail is not None else str(exc) or _cause_text(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text[:ERROR_CHARS]


def _cause_text(exc: BaseException) -> str:
    inner, depth = exc.__cause__ or exc.__context__, 0
    while inner is not None and not str(inner) and depth < 5:
        inner, depth = inner.__cause__ or inner.__context__, depth + 1
    return "" if inner is None or not str(inner) else f"{type(inner).__name__}: {inner}"


def status_outcome(status: int) -> Outcome:
    """Any 2xx is success; everything else, redirects included, is an HTTP error."""
    return Outcome.SUCCESS if 200 <= status <= 299 else Outcome.HTTP_ERROR


def status_error(status: int, reason: str | None, location: str | None) -> str | None:
    """The error text recorded for a non-2xx answer."""
    if 200 <= status <= 299:
        return None
    text = f"HTTPStatus: {status} {reason or ''}".rstrip()
    if 300 <= status <= 399:
        text += f" (redirect to {location or 'nowhere'} not followed)"
    return text[:ERROR_CHARS]
