import { createContextValues, type StreamResponse } from "@connectrpc/connect";
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
