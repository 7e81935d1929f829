"""The Tracer over the OpenTelemetry SDK (the ``otel`` extra), exporting over OTLP/HTTP.

Everything the standard variables say is the SDK's to read: the exporter reads
``OTEL_EXPORTER_OTLP_*`` (endpoint, headers, timeout, compression), the batch processor
``OTEL_BSP_*``, the provider ``OTEL_TRACES_SAMPLER``/``_ARG`` and the resource
``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES``. We add only what the SDK cannot know:
the run's trace identity (:mod:`cronwire.domain.tracing`), through an id generator that
hands out the ids we chose for the next span we start.

Spans are made after the fact with the measured instants (start_time/end_time), so the
executor's awaits never hold a span; sampling is decided by trace id before any span
object is built, so an unsampled run costs one hash and one comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from uuid import UUID

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
from cronwire.domain.model import ClaimedRun, RunStatus
from cronwire.domain.tracing import (
    attempt_span_of,
    redacted_url,
    run_trace_ids,
    server_of,
    traceparent,
)

MAX_LINKS = 128  # the SDK's default OTEL_SPAN_LINK_COUNT_LIMIT: more would be dropped anyway
# A run's trace context is asked for at its claim, send, attempt span and write: computed
# once and kept for the runs in flight (cleared whole when full; recomputing is only slower).
MEMO_RUNS = 65_536
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
_EMPTY = Context()
_RECORDED = frozenset({Decision.RECORD_AND_SAMPLE})


class _ChosenIds(RandomIdGenerator):
    """Random ids, except for the next span when the caller chose them (a run's root or
    one of its attempts): the SDK asks for ids only inside ``start_span``, which is
    synchronous, so a pending choice is always consumed by the span it was made for."""

    def __init__(self) -> None:
        self.trace_id: int | None = None
        self.span_id: int | None = None

    def generate_trace_id(self) -> int:
        chosen, self.trace_id = self.trace_id, None
        return chosen if chosen is not None else super().generate_trace_id()

    def generate_span_id(self) -> int:
        chosen, self.span_id = self.span_id, None
        return chosen if chosen is not None else super().generate_span_id()


def _ns(instant: datetime) -> int:
    return int(instant.timestamp() * 1_000_000_000)


def _error_type(result: DeliveryResult) -> str | None:
    """``error.type``: the status code of a non-2xx answer, else the error's class name
    (``TimeoutError``), else the outcome; None for a success."""
    if result.status_code is not None:
        return None if 200 <= result.status_code <= 299 else str(result.status_code)
    if result.error:
        name = result.error.split(":", 1)[0]
        if name.isidentifier():
            return name
    return str(result.outcome)


class OtelTracer:
    enabled = True

    def __init__(self, *, instance_id: str, environ: Mapping[str, str],
                 exporter: SpanExporter | None = None, version: str = "0") -> None:
        attributes = {"service.instance.id": instance_id}
        if not environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = "cronwire"
        self._ids = _ChosenIds()
        # The sampler comes from OTEL_TRACES_SAMPLER (default parentbased_always_on).
        self._provider = TracerProvider(resource=Resource.create(attributes),
                                        id_generator=self._ids)
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("cronwire", version)
        self._sampler = self._provider.sampler
        self._contexts: dict[UUID, tuple[SpanContext, bool, int]] = {}
        self._closed = False

    # -- the run's trace --------------------------------------------------------------

    def _sampled(self, trace_id: int) -> bool:
        result = self._sampler.should_sample(_EMPTY, trace_id, "cronwire.run")
        return result.decision in _RECORDED

    def _root_context(self, run_id: UUID) -> tuple[SpanContext, bool, int]:
        """The run's root span context, whether its trace is sampled, and its attempt key
        (memoised: asked for at the claim, the send, the attempt span and the write)."""
        found = self._contexts.get(run_id)
        if found is None:
            if len(self._contexts) >= MEMO_RUNS:
                self._contexts.clear()
            trace_id, root_span, attempt_key = run_trace_ids(run_id)
            sampled = self._sampled(trace_id)
            found = self._contexts[run_id] = (
                SpanContext(trace_id, root_span, is_remote=False,
                            trace_flags=_SAMPLED if sampled else _NOT_SAMPLED),
                sampled, attempt_key)
        return found

    def traceparent(self, run: ClaimedRun) -> str:
        root, sampled, key = self._root_context(run.id)
        return traceparent(root.trace_id,
                           attempt_span_of(key, run.attempt, run.lease_generation), sampled)

    def _links(self, run_ids: Sequence[UUID]) -> list[Link]:
        links: list[Link] = []
        for run_id in run_ids:
            context, sampled, _key = self._root_context(run_id)
            if sampled:
                links.append(Link(context))
                if len(links) >= MAX_LINKS:
                    break
        return links

    # -- spans ------------------------------------------------------------------------

    def attempt(self, run: ClaimedRun, request: DeliveryRequest,
                result: DeliveryResult) -> None:
        root, sampled, key = self._root_context(run.id)
        if not sampled:
            return
        host, port = server_of(request.url)
        attributes: dict[str, str | int] = {
            "http.request.method": request.method,
            "url.full": redacted_url(request.url),
            "cronwire.run.id": str(run.id),
            "cronwire.schedule.id": str(run.schedule_id),
            "cronwire.attempt": run.attempt,
            "cronwire.outcome": str(result.outcome),
        }
        if host is not None:
            attributes["server.address"] = host
        if port is not None:
            attributes["server.port"] = port
        if result.status_code is not None:
            attributes["http.response.status_code"] = result.status_code
        if run.attempt > 1:
            attributes["http.request.resend_count"] = run.attempt - 1
        error = _error_type(result)
        if error is not None:
            attributes["error.type"] = error
        self._ids.span_id = attempt_span_of(key, run.attempt, run.lease_generation)
        span = self._tracer.start_span(
            request.method, context=trace_api.set_span_in_context(
                trace_api.NonRecordingSpan(root)),
            kind=SpanKind.CLIENT, attributes=attributes, start_time=_ns(result.started_at))
        if error is not None:
            # Never the error's text: it may quote a receiver's redirect Location or the
            # target URL. The status code, or the error's class, says what went wrong.
            span.set_status(Status(StatusCode.ERROR,
                                   None if result.status_code is not None else error))
        span.end(end_time=_ns(result.finished_at))

    def _batch_span(self, name: str, start_ns: int, end_ns: int,
                    attributes: dict[str, str | int | bool], run_ids: Sequence[UUID],
                    failed: bool = False) -> None:
        """A batch operation's own trace, linked to the sampled runs it handled. Its trace
        id is drawn here so the sampler decides before the links are built: a dropped
        batch span costs no walk over its runs."""
        trace_id = self._ids.generate_trace_id()
        if not self._sampled(trace_id):
            return
        self._ids.trace_id = trace_id
        span = self._tracer.start_span(name, context=_EMPTY, kind=SpanKind.INTERNAL,
                                       attributes=attributes, links=self._links(run_ids),
                                       start_time=start_ns)
        if failed:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end_ns)

    def planner_tick(self, start_ns: int, end_ns: int, *, schedules: int, runs: int,
                     failed: bool, planned: Sequence[UUID]) -> None:
        self._batch_span("cronwire.planner.tick", start_ns, end_ns,
                         {"cronwire.planner.schedules": schedules,
                          "cronwire.planner.runs_inserted": runs},
                         planned, failed)

    def claim(self, start_ns: int, end_ns: int, *, source: str,
              runs: Sequence[ClaimedRun]) -> None:
        self._batch_span("cronwire.claim", start_ns, end_ns,
                         {"cronwire.claim.source": source, "cronwire.claim.runs": len(runs)},
                         [run.id for run in runs])

    def result_write(self, start_ns: int, end_ns: int,
                     written: Sequence[tuple[ClaimedRun, RunStatus | None]]) -> None:
        landed = sum(status is not None for _, status in written)
        self._batch_span("cronwire.result_write", start_ns, end_ns,
                         {"cronwire.write.runs": len(written), "cronwire.write.landed": landed},
                         [run.id for run, _ in written])
        for run, status in written:
            if status is not None and status.terminal:
                self._run_root(run, status, end_ns)

    def _run_root(self, run: ClaimedRun, status: RunStatus, end_ns: int) -> None:
        """The run's root span, from its occurrence to the write that ended it."""
        root, sampled, _key = self._root_context(run.id)
        del self._contexts[run.id]  # the run ended: its context is not asked for again
        if not sampled:
            return
        self._ids.trace_id, self._ids.span_id = root.trace_id, root.span_id
        span = self._tracer.start_span(
            "cronwire.run", context=_EMPTY, kind=SpanKind.INTERNAL,
            start_time=min(_ns(run.scheduled_for), end_ns),
            attributes={"cronwire.run.id": str(run.id),
                        "cronwire.schedule.id": str(run.schedule_id),
                        "cronwire.tenant.id": str(run.tenant_id),
                        "cronwire.run.trigger": str(run.trigger),
                        "cronwire.run.status": str(status),
                        "cronwire.run.attempts": run.attempt})
        if status is not RunStatus.SUCCEEDED:
            span.set_status(Status(StatusCode.ERROR, str(status)))
        span.end(end_time=end_ns)

    def force_flush(self, timeout_millis: int = 10_000) -> bool:
        return self._provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        if not self._closed:
            self._closed = True
            self._provider.shutdown()
