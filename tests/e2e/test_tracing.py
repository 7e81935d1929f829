"""Tracing end to end: a real replica process exports over OTLP/HTTP (the real exporter)
to a real receiver that decodes the OTel protobufs, and the receiver of the webhooks sees
a ``traceparent`` naming the very span that was exported for that attempt (ADR 0035).
No span carries a tenant's secret, and a tenant's own trace context is replaced
(CONTRACT.md, "Tenant isolation in depth")."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from cronwire.harness.seeding import seed_schedule, seed_tenant
from cronwire.harness.sink import Reply, Sink, always, by_attempt
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.replicas import ReplicaSet

CLIENT = 3  # opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_CLIENT
ERROR = 2  # Status.STATUS_CODE_ERROR
TRACED = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_TRACES_SAMPLER": "always_on"}
# A tenant's own W3C trace context, as a target header may carry it (any case).
TENANT_TRACE = {"TraceParent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01",
                "TRACESTATE": "vendor=s3cret-state"}


async def _two_occurrences_soon(pool: asyncpg.Pool, url: str,
                                headers: dict[str, str] | None = None) -> None:
    tenant = await seed_tenant(pool)  # type: ignore[arg-type]
    schedule = await seed_schedule(pool, tenant, url,  # type: ignore[arg-type]
                                   headers=headers)
    # Every second, for two occurrences: the planner plans them (its tick is traced).
    await pool.execute(
        "UPDATE schedule SET cron = '* * * * * *', "
        "next_fire_at = date_trunc('second', now()) + interval '2 seconds', "
        "ends_at = date_trunc('second', now()) + interval '3.5 seconds' WHERE id = $1",
        schedule.id)


def _parse(header: str) -> tuple[str, str, str]:
    version, trace_id, span_id, flags = header.split("-")
    assert version == "00" and len(trace_id) == 32 and len(span_id) == 16
    return trace_id, span_id, flags


async def test_each_attempt_is_a_client_span_of_the_runs_trace_and_its_traceparent(
    db_pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    behaviour = by_attempt({1: Reply(status=500)}, Reply(status=200))
    async with OtlpReceiver() as otlp, Sink(behaviour=behaviour) as sink, \
            ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        await _two_occurrences_soon(db_pool, sink.url + "?token=s3cret&page=2")
        await fleet.spawn("traced", roles="planner,executor", extra_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_TRACES_SAMPLER": "always_on",
            "OTEL_SERVICE_NAME": "cronwire-under-test",
        })
        await sink.wait_for(lambda s: s.unique >= 2, within=60)
        await otlp.wait_for(lambda r: len(r.named("cronwire.run")) >= 2, within=60)
        await otlp.wait_for(lambda r: bool(r.named("cronwire.planner.tick")), within=30)

    roots = {span.trace_id: span for span in otlp.named("cronwire.run")}
    attempts = {span.span_id: span for span in otlp.spans if span.kind == CLIENT}
    assert len(roots) == 2
    for webhook_id in sink.acknowledged:
        arrivals = sorted(sink.for_id(webhook_id), key=lambda a: a.attempt)
        assert [a.status for a in arrivals] == [500, 200]
        parents = [_parse(a.headers["traceparent"]) for a in arrivals]
        trace_id = parents[0][0]
        assert {p[0] for p in parents} == {trace_id}, "one trace per run"
        assert all(flags == "01" for _, _, flags in parents)
        root = roots[trace_id]
        assert root.attributes["cronwire.run.id"] == arrivals[0].run_id
        assert root.attributes["cronwire.run.status"] == "succeeded"
        assert root.parent_span_id == ""
        assert root.resource["service.name"] == "cronwire-under-test"
        spans: list[ReceivedSpan] = [attempts[span_id] for _, span_id, _ in parents]
        for number, span in enumerate(spans, start=1):
            assert span.trace_id == trace_id and span.parent_span_id == root.span_id
            assert span.name == "POST"
            a = span.attributes
            assert a["http.request.method"] == "POST"
            assert a["url.full"] == f"http://127.0.0.1:{sink.port}/hook"  # no query
            assert "s3cret" not in str(a)
            assert (a["server.address"], a["server.port"]) == ("127.0.0.1", sink.port)
            assert a["cronwire.attempt"] == number
        assert spans[0].attributes["http.response.status_code"] == 500
        assert spans[0].attributes["error.type"] == "500" and spans[0].status_code == ERROR
        assert spans[1].attributes["http.response.status_code"] == 200
        assert "error.type" not in spans[1].attributes
        assert spans[1].attributes["http.request.resend_count"] == 1
        assert spans[0].end_ns <= spans[1].start_ns

    linked = {link for name in ("cronwire.planner.tick", "cronwire.claim",
                                "cronwire.result_write")
              for span in otlp.named(name) for link in span.links}
    for root in roots.values():
        assert (root.trace_id, root.span_id) in linked
    assert otlp.named("cronwire.claim") and otlp.named("cronwire.result_write")
    assert any(span.attributes["cronwire.planner.runs_inserted"] >= 1
               for span in otlp.named("cronwire.planner.tick"))


async def test_spans_keep_no_secret_of_the_target_and_a_tenants_trace_context_is_replaced(
    db_pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    # A webhook URL with its secret in the path (Slack's shape) and in the query, a receiver
    # redirecting to a URL with a secret, and the tenant's own traceparent/tracestate.
    moved = Reply(status=302, headers={"location": "https://elsewhere.example/s3cret-moved"})
    async with OtlpReceiver() as otlp, Sink(behaviour=always(moved)) as sink, \
            ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        url = sink.url_for("/services/T000/B000/s3cret-path") + "?s3cret-name=s3cret-value"
        await _two_occurrences_soon(db_pool, url, headers=TENANT_TRACE)
        await fleet.spawn("traced", roles="planner,executor", extra_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint, **TRACED})
        await sink.wait_for(lambda s: len(s.arrivals) >= 2, within=60)
        await otlp.wait_for(lambda r: len(r.named("cronwire.run")) >= 2, within=60)

    attempts = {span.span_id: span for span in otlp.spans if span.kind == CLIENT}
    assert len(attempts) >= 2
    for span in attempts.values():
        assert span.attributes["url.full"] == (
            f"http://127.0.0.1:{sink.port}/services/REDACTED/REDACTED/REDACTED")
        assert span.attributes["error.type"] == "302" and span.status_code == ERROR
    exported = repr([(s.name, s.attributes, s.status_message, s.resource, s.links)
                     for s in otlp.spans])
    assert "s3cret" not in exported
    for arrival in sink.arrivals:
        assert "tracestate" not in arrival.headers
        [parent] = arrival.headers.getall("traceparent")
        trace_id, span_id, _flags = _parse(parent)
        assert trace_id != "a" * 32 and span_id in attempts, "ours, naming our span"
        assert attempts[span_id].trace_id == trace_id


async def test_without_an_endpoint_nothing_is_exported_and_no_traceparent_sent(
    db_pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    async with OtlpReceiver() as otlp, Sink() as sink, \
            ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        await _two_occurrences_soon(db_pool, sink.url)
        # The sampler is set, the endpoint is not: the endpoint alone switches tracing on.
        await fleet.spawn("untraced", roles="planner,executor",
                          extra_env={"OTEL_TRACES_SAMPLER": "always_on"})
        await sink.wait_for(lambda s: s.unique >= 2, within=60)
    assert all("traceparent" not in a.headers for a in sink.arrivals)
    assert otlp.spans == []


async def test_without_tracing_a_tenants_trace_context_passes_as_given(
    db_pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    async with Sink() as sink, ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        await _two_occurrences_soon(db_pool, sink.url, headers=TENANT_TRACE)
        await fleet.spawn("untraced", roles="planner,executor")
        await sink.wait_for(lambda s: s.unique >= 2, within=60)
    for arrival in sink.arrivals:
        assert arrival.headers.getall("traceparent") == [TENANT_TRACE["TraceParent"]]
        assert arrival.headers.getall("tracestate") == [TENANT_TRACE["TRACESTATE"]]
