"""What one attempt of the lean deliverer came to: the result of an answer or of a
failure, and the two rules of an exchange that ends badly (an abandoned exchange closes
its connection; a reset on a reused connection is the keep-alive race, never resent)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from cronwire.adapters.http.attempt_timer import AttemptTimer
from cronwire.adapters.http.http1 import Connection, decoded
from cronwire.adapters.http.response_reader import Answer
from cronwire.domain.delivery import (
    DeliveryRequest,
    DeliveryResult,
    Outcome,
    error_text,
    parse_retry_after,
    response_excerpt,
    status_error,
    status_outcome,
)
from cronwire.domain.errors import InvalidTarget, TargetRefused


def abandon_exchange(waiter: asyncio.Future[Answer],
                     result: asyncio.Future[DeliveryResult]) -> None:
    """A cancelled ``LeanDeliverer.begin`` future cancels its exchange (which closes the
    connection: an abandoned exchange never goes back to the pool)."""
    if result.cancelled() and not waiter.done():
        waiter.cancel()


def reset_explained(connection: Connection, exc: ConnectionResetError) -> ConnectionResetError:
    """The keep-alive race: the receiver closed the idle connection as the request went out.
    It may have read the request, so it is not resent: the attempt fails and the retry
    policy decides. Any other reset is returned as it is."""
    reader = connection.reader
    if connection.reused and reader is not None and reader.received == 0:
        return ConnectionResetError(
            "the receiver closed a reused keep-alive connection without answering;"
            " the request was not resent (it may have arrived)")
    return exc


def failed_result(timer: AttemptTimer, exc: BaseException, req: DeliveryRequest) -> DeliveryResult:
    if isinstance(exc, (InvalidTarget, TargetRefused)):
        return timer.result(Outcome.BLOCKED, error=error_text(exc))
    if isinstance(exc, TimeoutError):
        detail = f"no response within {req.timeout_seconds:g}s"
        return timer.result(Outcome.TIMEOUT, error=error_text(exc, detail))
    return timer.result(Outcome.CONNECTION_ERROR, error=error_text(exc))


def answered_result(timer: AttemptTimer, answer: Answer) -> DeliveryResult:
    status = answer.status
    location = answer.header(b"location") if 300 <= status <= 399 else None
    retry_after = answer.header(b"retry-after")
    return timer.result(
        status_outcome(status),
        status=status,
        error=status_error(status, answer.reason, location),
        excerpt=response_excerpt(decoded(answer)) if answer.body else None,
        retry_after=parse_retry_after(retry_after, datetime.now(UTC))
        if retry_after is not None else None,
    )
