import { createContextValues, type StreamResponse } from "@connectrpc/connect";
import { context, propagation, SpanKind, trace } from "@opentelemetry/api";
import {
  InMemorySpanExporter,
  NodeTracerProvider,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-node";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { createTraceInterceptor } from "./trace-interceptor.js";

describe("createTraceInterceptor without an OpenTelemetry SDK", () => {
  it("passes the call and its response stream through untouched, even with a traceparent", async () => {
    const method = SpillwayService.method.readToolOutput;
    const response = {
      stream: true,
      service: SpillwayService,
      method,
      header: new Headers(),
      trailer: new Headers(),
      message: (async function* () {})(),
    } as unknown as StreamResponse;
    let seen: unknown;
    const handler = createTraceInterceptor("0.1.0")(async (req) => {
      seen = req;
      return response;
    });
    const req = {
      stream: false,
      service: SpillwayService,
      method,
      requestMethod: "POST",
      url: "http://127.0.0.1/spillway.v1.SpillwayService/ReadToolOutput",
      signal: new AbortController().signal,
      header: new Headers({ traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01` }),
      contextValues: createContextValues(),
      message: {},
    } as unknown as Parameters<typeof handler>[0];
    // The same objects, not wrappers: no span, no observed stream, no context switch.
    expect(await handler(req)).toBe(response);
    expect(seen).toBe(req);
  });
});

describe("createTraceInterceptor with an OpenTelemetry SDK", () => {
  it("keeps the call's span active in every step of its response stream, and ends it after", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new NodeTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    provider.register();
    try {
      const method = SpillwayService.method.readToolOutput;
      const activeInSteps: (string | undefined)[] = [];
      const handler = createTraceInterceptor("0.1.0")(async () => {
        async function* frames() {
          for (let i = 0; i < 3; i++) {
            // A reader resumes the stream from its own context, after an await each time.
            await new Promise((resolve) => setTimeout(resolve, 1));
            activeInSteps.push(trace.getActiveSpan()?.spanContext().spanId);
            yield {};
          }
        }
        return {
          stream: true,
          service: SpillwayService,
          method,
          header: new Headers(),
          trailer: new Headers(),
          message: frames(),
        } as unknown as StreamResponse;
      });
      const res = await handler({
        stream: false,
        service: SpillwayService,
        method,
        requestMethod: "POST",
        url: "http://127.0.0.1/spillway.v1.SpillwayService/ReadToolOutput",
        signal: new AbortController().signal,
        header: new Headers({ traceparent: `00-${"c".repeat(32)}-${"d".repeat(16)}-01` }),
        contextValues: createContextValues(),
        message: {},
      } as unknown as Parameters<typeof handler>[0]);
      expect(exporter.getFinishedSpans()).toEqual([]);
      if (!res.stream) throw new Error("expected a stream");
      for await (const _ of res.message) {
        // Read in the test's own (root) context.
      }
      const [span, ...others] = exporter.getFinishedSpans();
      expect(others).toEqual([]);
      expect(span?.kind).toBe(SpanKind.SERVER);
      expect(span?.spanContext().traceId).toBe("c".repeat(32));
      expect(span?.parentSpanContext?.spanId).toBe("d".repeat(16));
      expect(activeInSteps).toEqual([1, 2, 3].map(() => span?.spanContext().spanId));
    } finally {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    }
  });
});
