"""The run's trace identity (domain/tracing.py): deterministic, W3C-shaped, sampler-safe,
and the URL a span shows stripped of anything a tenant's URL may hide a secret in."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
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


@pytest.mark.parametrize(("url", "full"), [
    # CONTRACT.md, "Tenant isolation in depth": webhook secrets ride in the path.
    ("https://hooks.slack.com/services/T000/B000/XXXXXXXX",
     "https://hooks.slack.com:443/services/REDACTED/REDACTED/REDACTED"),
    ("https://discord.com/api/webhooks/1234/tok-en?wait=true",
     "https://discord.com:443/api/REDACTED/REDACTED/REDACTED"),
    # No credentials, no query (not even its names), no fragment; the port written out.
    ("https://user:pw@Example.com:8443/a/b?token=x&sig=y&flag#frag",
     "https://example.com:8443/a/REDACTED"),
    ("http://example.com/plain?s3cret_name=1", "http://example.com:80/plain"),
    ("http://example.com", "http://example.com:80"),
    ("http://example.com/", "http://example.com:80/"),
    ("http://[::1]:81/a//b/", "http://[::1]:81/a//REDACTED/"),  # empty segments hold nothing
    ("http://example.com:99999/x", "REDACTED"),  # unparseable port
    ("example.com/services/T000", "REDACTED"),  # no scheme, no host
])
def test_url_full_keeps_the_origin_and_first_segment_only(url: str, full: str) -> None:
    assert redacted_url(url) == full


def test_server_address_and_port() -> None:
    assert server_of("https://Example.com/x") == ("example.com", 443)
    assert server_of("http://[::1]:81/") == ("::1", 81)


_SECRET = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~%",
                  min_size=10, max_size=40)
_SEGMENT = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.~", max_size=20)


@given(first=_SEGMENT, secrets=st.lists(_SECRET, min_size=1, max_size=5),
       names=st.lists(_SECRET, max_size=3), scheme=st.sampled_from(["http", "https"]),
       port=st.one_of(st.none(), st.integers(1, 65535)))
def test_no_later_segment_nor_any_query_text_reaches_a_span(
        first: str, secrets: list[str], names: list[str], scheme: str, port: int | None) -> None:
    origin = f"{scheme}://hooks.example.com" + ("" if port is None else f":{port}")
    query = "&".join(f"{name}={secret}" for name, secret in zip(names, secrets, strict=False))
    url = f"{origin}/{first}/{'/'.join(secrets)}" + (f"?{query}" if query else "")
    full = redacted_url(url)
    shown_port = port if port is not None else {"http": 80, "https": 443}[scheme]
    assert full == (f"{scheme}://hooks.example.com:{shown_port}/{first}"
                    + "".join(f"/{'REDACTED' if s else ''}" for s in secrets))
    for hidden in secrets + names:
        assume(hidden not in f"{origin}/{first}" and hidden not in "REDACTED")
        assert hidden not in full
