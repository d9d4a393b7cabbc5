"""W3C trace context from the SDK's calls: opentelemetry-instrumentation-grpc's client spans
become the parents of the server spans a real `spillway serve` (with the documented OTel
preload, docs/tracing/otel-preload.mjs) exports to a local OTLP/HTTP receiver."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import (
    GrpcAioInstrumentorClient,
    GrpcInstrumentorClient,
    aio_client_interceptors,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from conftest import REPO, spillway_server
from spillway_client import AsyncSpillwayClient, SpillwayClient

PRELOAD = REPO / "docs" / "tracing" / "otel-preload.mjs"


class OtlpReceiver:
    """A local OTLP/HTTP (JSON) trace receiver: every span posted to /v1/traces."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        spans = self.spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self._body())
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                for rs in body["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        spans.extend(ss["spans"])
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def _body(self) -> bytes:
                if self.headers["content-length"] is not None:
                    return self.rfile.read(int(self.headers["content-length"]))
                # The Node exporter may send its JSON chunked.
                body = b""
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    body += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
                return body

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def child_of(self, parent: ReadableSpan) -> dict[str, Any]:
        """The one server span whose parent is `parent`, once the server exported it (within 10 s)."""
        assert parent.context is not None
        span_id = format(parent.context.span_id, "016x")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            children = [s for s in self.spans if s.get("parentSpanId") == span_id]
            if children:
                assert len(children) == 1
                return children[0]
            time.sleep(0.05)
        raise AssertionError(f"the server exported no span whose parent is {span_id}")


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.server.shutdown()


@pytest.fixture(scope="module")
def traced_url(receiver: OtlpReceiver) -> Iterator[str]:
    """A server that exports a span per call to the receiver."""
    env = {
        "NODE_OPTIONS": f"--import {PRELOAD}",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    with spillway_server(env=env) as url:
        yield url


@pytest.fixture(scope="module")
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """The application's tracer provider, installed as the global one, its finished spans kept in
    memory. GrpcInstrumentorClient (sync) traces with the global provider whatever
    `tracer_provider` it is given, so the application must install its own globally."""
    exported = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exported))
    trace.set_tracer_provider(tracer_provider)
    yield tracer_provider, exported
    tracer_provider.shutdown()


@pytest.fixture
def exporter(provider: tuple[TracerProvider, InMemorySpanExporter]) -> tuple[TracerProvider, InMemorySpanExporter]:
    """provider, with no finished spans yet."""
    provider[1].clear()
    return provider


def client_span(exported: InMemorySpanExporter, method: str) -> ReadableSpan:
    """The one grpc CLIENT span the instrumentation recorded for method."""
    spans = [s for s in exported.get_finished_spans() if s.kind == SpanKind.CLIENT and s.name.endswith(f"/{method}")]
    assert len(spans) == 1, [s.name for s in exported.get_finished_spans()]
    return spans[0]


def assert_traced(
    receiver: OtlpReceiver, exported: InMemorySpanExporter, app: ReadableSpan, methods: tuple[str, ...]
) -> None:
    """Each method's grpc client span is a child of the application's span and the parent of the
    server's span, all in the application's trace."""
    assert app.context is not None
    for method in methods:
        grpc_span = client_span(exported, method)
        assert grpc_span.parent is not None
        assert grpc_span.parent.span_id == app.context.span_id
        server = receiver.child_of(grpc_span)
        assert server["traceId"] == format(app.context.trace_id, "032x")
        assert server["name"] == f"spillway.v1.SpillwayService/{method}"
        assert server["kind"] == 2  # SERVER


def test_sync_client_calls_continue_the_applications_trace(
    traced_url: str, receiver: OtlpReceiver, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exported = exporter
    instrumentor = GrpcInstrumentorClient()
    # The instrumentation wraps grpc's channel constructors: a client created after it is traced,
    # by the global tracer provider (the `provider` fixture installed it).
    instrumentor.instrument()
    try:
        with (
            SpillwayClient(traced_url) as sdk,
            provider.get_tracer("agent-runtime").start_as_current_span("tool call"),
        ):
            run_id = f"run-{uuid.uuid4().hex[:12]}"
            # Large enough to stream on its own Offload call.
            att = sdk.offload({"tenant": "dev", "run_id": run_id, "call_id": "c1"}, "traced\n" * 20_000)
            sdk.stat(run_id, att.handle)
    finally:
        instrumentor.uninstrument()
    app = next(s for s in exported.get_finished_spans() if s.name == "tool call")
    assert_traced(receiver, exported, app, ("Offload", "StatToolOutput"))


async def test_async_client_calls_continue_the_applications_trace(
    traced_url: str, receiver: OtlpReceiver, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exported = exporter
    instrumentor = GrpcAioInstrumentorClient()
    # Patches grpc.aio's channel constructors; the aio instrumentation honours tracer_provider.
    instrumentor.instrument(tracer_provider=provider)
    try:
        async with AsyncSpillwayClient(traced_url) as sdk:
            with provider.get_tracer("agent-runtime").start_as_current_span("tool call"):
                run_id = f"run-{uuid.uuid4().hex[:12]}"
                att = await sdk.offload({"tenant": "dev", "run_id": run_id, "call_id": "c1"}, "traced\n" * 20_000)
                await sdk.stat(run_id, att.handle)
    finally:
        instrumentor.uninstrument()
    app = next(s for s in exported.get_finished_spans() if s.name == "tool call")
    assert_traced(receiver, exported, app, ("Offload", "StatToolOutput"))


async def test_async_client_traced_by_explicit_interceptors(
    traced_url: str, receiver: OtlpReceiver, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exported = exporter
    # No global patching: the SDK's `interceptors` take the instrumentation's aio interceptors.
    interceptors = aio_client_interceptors(tracer_provider=provider)
    async with AsyncSpillwayClient(traced_url, interceptors=interceptors) as sdk:
        with provider.get_tracer("agent-runtime").start_as_current_span("tool call"):
            run_id = f"run-{uuid.uuid4().hex[:12]}"
            att = await sdk.offload({"tenant": "dev", "run_id": run_id, "call_id": "c1"}, "traced\n" * 20_000)
            await sdk.stat(run_id, att.handle)
    app = next(s for s in exported.get_finished_spans() if s.name == "tool call")
    assert_traced(receiver, exported, app, ("Offload", "StatToolOutput"))
