"""Tracing over OpenTelemetry (the ``otel`` extra): :mod:`.setup` picks the Tracer from
the standard variables (the port's NoTracer when nothing is configured, without importing
OpenTelemetry at all); :mod:`.tracer` is the SDK adapter."""
