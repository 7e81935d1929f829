"""Which Tracer a replica gets, decided from the standard OpenTelemetry variables."""

from __future__ import annotations

from collections.abc import Mapping

from cronwire.domain.errors import ConfigError
from cronwire.ports.observability import NoTracer, Tracer

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def tracing_requested(environ: Mapping[str, str]) -> bool:
    """An OTLP endpoint is configured and the SDK is not switched off
    (``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def check_tracing(environ: Mapping[str, str]) -> None:
    """Refuse at start-up an endpoint without the ``otel`` extra to export to it."""
    if not tracing_requested(environ):
        return
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise ConfigError(
            "OTEL_EXPORTER_OTLP_ENDPOINT: set, but the OpenTelemetry SDK is not installed; "
            "install the extra (pip install 'cronwire[otel]') or unset the variable"
        ) from None


def build_tracer(environ: Mapping[str, str], instance_id: str, version: str) -> Tracer:
    if not tracing_requested(environ):
        return NoTracer()
    check_tracing(environ)
    from cronwire.adapters.otel.tracer import OtelTracer

    return OtelTracer(instance_id=instance_id, environ=environ, version=version)
