"""The run's trace identity (domain/tracing.py): deterministic, W3C-shaped, sampler-safe,
and URLs redacted the way the OTel HTTP conventions ask."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from cronwire.domain.model import run_id_for
from cronwire.domain.tracing import (
    attempt_span_id,
    redacted_url,
    run_root_span_id,
    run_trace_id,
    server_of,
    traceparent,
)


def _runs(n: int) -> list[uuid.UUID]:
    schedule = uuid.UUID("11111111-2222-3333-4444-555555555555")
    start = datetime(2027, 1, 1, tzinfo=UTC)
    return [run_id_for(schedule, start + timedelta(seconds=i)) for i in range(n)]


def test_ids_are_deterministic_and_distinct() -> None:
    run = _runs(1)[0]
    assert run_trace_id(run) == run_trace_id(uuid.UUID(str(run)))
    spans = {run_root_span_id(run), attempt_span_id(run, 1, 1), attempt_span_id(run, 2, 2),
             attempt_span_id(run, 1, 2)}
    assert len(spans) == 4 and all(0 < s < 2**64 for s in spans)
    assert 0 < run_trace_id(run) < 2**128


def test_traceparent_is_w3c_version_00() -> None:
    assert traceparent(0xABC, 0x12, True) == f"00-{0xABC:032x}-{0x12:016x}-01"
    assert traceparent(1, 1, False).endswith("-00")


def test_a_ratio_sampler_keeps_about_its_ratio_of_runs() -> None:
    # uuid5 bits where the ratio sampler reads would keep 0% or 100%; hashed ids keep ~10%.
    sampler = TraceIdRatioBased(0.1)
    kept = sum(sampler.should_sample(Context(), run_trace_id(r), "run").decision.is_sampled()
               for r in _runs(5000))
    assert 350 < kept < 650


def test_url_full_has_credentials_and_every_query_value_redacted() -> None:
    assert redacted_url("https://user:pw@example.com:8443/a/b?token=x&sig=y&flag") == (
        "https://REDACTED:REDACTED@example.com:8443/a/b?token=REDACTED&sig=REDACTED&flag=REDACTED")
    assert redacted_url("http://example.com/plain") == "http://example.com/plain"
    assert redacted_url("http://example.com/p#frag") == "http://example.com/p"
    assert server_of("https://Example.com/x") == ("example.com", 443)
    assert server_of("http://[::1]:81/") == ("::1", 81)
