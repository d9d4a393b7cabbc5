// Registers an OpenTelemetry SDK in `spillway serve` before the server starts, so every call
// becomes a server span exported over OTLP/HTTP (JSON). Spillway itself depends only on
// @opentelemetry/api, which is a no-op until an SDK like this one is registered.
//
// Install beside it (versions this file is tested with):
//   npm install @opentelemetry/sdk-trace-node@2.12.1 @opentelemetry/resources@2.12.1 \
//     @opentelemetry/exporter-trace-otlp-http@0.223.1
// Run:
//   NODE_OPTIONS="--import /path/to/otel-preload.mjs" \
//   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://collector:4318/v1/traces spillway serve
//
// The exporter and the batch processor read the standard OTEL_* variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_BSP_SCHEDULE_DELAY, …);
// OTEL_SERVICE_NAME names the service (default `spillway`).
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": process.env.OTEL_SERVICE_NAME ?? "spillway" }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
// Installs the global tracer provider, the W3C trace-context and baggage propagators (which
// read `traceparent`, `tracestate` and `baggage` from incoming calls) and an
// AsyncLocalStorage context manager.
provider.register();

// Spans still batched when a drain starts are exported at once: Spillway drains on SIGTERM for
// its drain delay and grace, long enough for one export. A signal that comes before Spillway
// has installed its own handler is sent again, so it still ends the process as it would have.
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.once(signal, () => {
    provider.forceFlush().catch(() => {});
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  });
}
