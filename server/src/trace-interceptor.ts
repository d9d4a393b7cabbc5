import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Attributes,
  context,
  isSpanContextValid,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  trace,
} from "@opentelemetry/api";
import { faultOf } from "./call-fault.js";
import { observeIterable } from "./observe-iterable.js";

/** Reads propagation fields (`traceparent`, `tracestate`, `baggage`) from request headers. */
const headerGetter: TextMapGetter<Headers> = {
  keys: (headers) => [...headers.keys()],
  get: (headers, key) => headers.get(key) ?? undefined,
};

/**
 * createTraceInterceptor emits one OpenTelemetry server span per call through
 * `@opentelemetry/api`, a child of the W3C `traceparent`/`tracestate` the request carries (as
 * extracted by the registered propagator), named `<service>/<method>` with the RPC semantic
 * conventions' attributes — `rpc.system` `grpc`, `rpc.service`, `rpc.method`,
 * `rpc.grpc.status_code` — plus `spillway.fault` (`client` or `server`) on failures. The span
 * ends when the response does (a stream when its last message is sent, it fails or the caller
 * goes away); its status is ERROR only for server faults (call-fault.ts), so a client's mistake
 * never shows as the server's error. The call runs with the span active, so log lines carry its
 * trace id.
 *
 * Without an OpenTelemetry SDK registered the API is a no-op: nothing is extracted, the span is
 * invalid and not recording, and the call passes straight through.
 */
export function createTraceInterceptor(version: string): Interceptor {
  const tracer = trace.getTracer("spillway", version);
  return (next) => async (req) => {
    const parent = propagation.extract(ROOT_CONTEXT, req.header, headerGetter);
    const attributes: Attributes = {
      "rpc.system": "grpc",
      "rpc.service": req.service.typeName,
      "rpc.method": req.method.name,
    };
    const span = tracer.startSpan(
      `${req.service.typeName}/${req.method.name}`,
      { kind: SpanKind.SERVER, attributes },
      parent,
    );
    if (!span.isRecording() && !isSpanContextValid(span.spanContext())) {
      return next(req);
    }
    let ended = false;
    const end = (err: unknown) => {
      if (ended) return;
      ended = true;
      const failure = err === undefined ? undefined : ConnectError.from(err);
      span.setAttribute("rpc.grpc.status_code", failure?.code ?? 0);
      const fault = faultOf(err);
      if (fault !== undefined) span.setAttribute("spillway.fault", fault);
      if (fault === "server") {
        span.setStatus({ code: SpanStatusCode.ERROR, message: failure?.rawMessage ?? "" });
      }
      span.end();
    };
    try {
      const res = await context.with(trace.setSpan(parent, span), () => next(req));
      if (!res.stream) {
        end(undefined);
        return res;
      }
      return {
        ...res,
        message: observeIterable(res.message, {
          onEnd: (ending) =>
            end(
              ending.kind === "failed"
                ? ending.error
                : ending.kind === "abandoned"
                  ? new ConnectError("the caller went away", Code.Canceled)
                  : undefined,
            ),
        }),
      };
    } catch (err) {
      end(err);
      throw err;
    }
  };
}
