"""Which Tracer a replica gets from the standard OpenTelemetry variables."""

from __future__ import annotations

import sys

import pytest

from cronwire.adapters.otel.setup import build_tracer, check_tracing, tracing_requested
from cronwire.domain.errors import ConfigError
from cronwire.ports.observability import NoTracer

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(("environ", "requested"), [
    ({}, False),
    ({"OTEL_TRACES_SAMPLER": "always_on"}, False),
    (ENDPOINT, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
    ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
])
def test_only_an_endpoint_turns_tracing_on(environ: dict[str, str], requested: bool) -> None:
    assert tracing_requested(environ) is requested


def test_without_configuration_the_tracer_is_the_null_one() -> None:
    tracer = build_tracer({}, "replica-1", "0")
    assert isinstance(tracer, NoTracer) and tracer.enabled is False


def test_with_an_endpoint_the_otel_tracer_is_enabled() -> None:
    tracer = build_tracer(ENDPOINT, "replica-1", "0")
    try:
        assert tracer.enabled is True and not isinstance(tracer, NoTracer)
    finally:
        tracer.shutdown()


def test_an_endpoint_without_the_sdk_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A module set to None in sys.modules makes its import raise ImportError.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ConfigError, match=r"^OTEL_EXPORTER_OTLP_ENDPOINT: .*cronwire\[otel\]"):
        check_tracing(ENDPOINT)
    check_tracing({})  # nothing asked for: nothing to refuse
