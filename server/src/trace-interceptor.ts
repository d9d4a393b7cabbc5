import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Attributes,
  type Context,
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
 * withContext runs every step of `source` in `ctx`: a handler's response stream resumes in its
 * reader's context, and the store calls it makes must see the call's span as their parent.
 */
function withContext<T>(source: AsyncIterable<T>, ctx: Context): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      const it = context.with(ctx, () => source[Symbol.asyncIterator]());
      return {
        next: () => context.with(ctx, () => it.next()),
        return: (value?: unknown) =>
          context.with(
            ctx,
            () => it.return?.(value) ?? Promise.resolve({ done: true, value } as IteratorResult<T>),
          ),
      };
    },
  };
}

/**
 * createTraceInterceptor emits one OpenTelemetry server span per call through
 * `@opentelemetry/api`, a child of the W3C `traceparent`/`tracestate` the request carries (as
 * extracted by the registered propagator), named `<service>/<method>` with the RPC semantic
 * conventions' attributes — `rpc.system` `grpc`, `rpc.service`, `rpc.method`,
 * `rpc.grpc.status_code` — plus `spillway.fault` (`client` or `server`) on failures. The span
 * ends when the response does (a stream when its last message is sent, it fails or the caller
 * goes away); its status is ERROR only for server faults (call-fault.ts), so a client's mistake
 * never shows as the server's error. The call, and each step of its response stream, runs with
 * the span active, so log lines carry its trace id and instrumented store calls nest under it.
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
    const active = trace.setSpan(parent, span);
    try {
      const res = await context.with(active, () => next(req));
      if (!res.stream) {
        end(undefined);
        return res;
      }
      return {
        ...res,
        message: observeIterable(withContext(res.message, active), {
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
