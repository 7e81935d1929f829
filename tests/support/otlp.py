"""A real OTLP/HTTP trace receiver on loopback: decodes each export with the OTel
protobufs (``opentelemetry-proto``) and keeps the spans, for tracing tests.

``POST /v1/traces`` with ``application/x-protobuf`` (gzip or not) is what the OTLP/HTTP
exporter sends; anything else is refused with 415 so a wrong encoding fails the test.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root
    kind: int  # the protobuf's Span.SpanKind value (3: CLIENT)
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    links: list[tuple[str, str]]  # (trace id, span id)
    resource: dict[str, Any]
    start_ns: int
    end_ns: int


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


@dataclass
class OtlpReceiver:
    spans: list[ReceivedSpan] = field(default_factory=list)
    port: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    @property
    def endpoint(self) -> str:
        """What OTEL_EXPORTER_OTLP_ENDPOINT is set to (the exporter appends /v1/traces)."""
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> OtlpReceiver:
        app = web.Application()
        app.router.add_post("/v1/traces", self._export)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def named(self, name: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == name]

    async def wait_for(self, predicate: Callable[[OtlpReceiver], bool], within: float) -> None:
        async with asyncio.timeout(within):
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

    async def _export(self, request: web.Request) -> web.Response:
        if request.content_type != "application/x-protobuf":
            return web.Response(status=415)
        body = await request.read()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest.FromString(body)
        for resource_spans in export.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append(ReceivedSpan(
                        name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(), kind=span.kind,
                        attributes=_attributes(span.attributes), status_code=span.status.code,
                        status_message=span.status.message,
                        links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                        resource=resource, start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano))
        self._changed.set()
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")
