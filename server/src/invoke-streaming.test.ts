import { create, isMessage } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextKey,
  createContextValues,
  createServiceImplSpec,
  type Interceptor,
} from "@connectrpc/connect";
import {
  Health,
  type HealthCheckRequest,
  HealthCheckRequestSchema,
  type HealthCheckResponse,
  HealthCheckResponseSchema,
} from "@spillway/proto/grpc/health/v1/health_pb.js";
import { describe, expect, it } from "vitest";
import { collect } from "../../test/support/collect.js";
import { createCallContext } from "./grpc-node-handler.js";
import { invokeStreaming } from "./invoke-streaming.js";

const seen = createContextKey("", { description: "what an interceptor put in the context" });

/** Health's Watch, answering with what it was asked and what its context says. */
function watchSpec(log: string[]) {
  const spec = createServiceImplSpec<typeof Health>(Health, {
    check: () => ({}),
    async *watch(req, ctx) {
      log.push(`impl ${req.service} ${ctx.requestHeader.get("x-added")} ${ctx.values.get(seen)}`);
      yield { status: 1 };
      yield create(HealthCheckResponseSchema, { status: 2 });
    },
  });
  const watch = spec.methods.watch;
  if (watch?.kind !== "server_streaming") throw new Error("Watch is server-streaming");
  return watch;
}

function contextFor(spec: ReturnType<typeof watchSpec>) {
  return createCallContext(
    spec,
    { protocolName: "grpc", url: "http://localhost/grpc.health.v1.Health/Watch", contentType: "" },
    [["x-original", "1"]],
    undefined,
    createContextValues(),
  );
}

async function* requests(...services: string[]): AsyncGenerator<HealthCheckRequest> {
  for (const service of services) yield create(HealthCheckRequestSchema, { service });
}

describe("invokeStreaming, server-streaming", () => {
  it("runs the interceptors in order around the implementation, each seeing every message", async () => {
    const log: string[] = [];
    const spec = watchSpec(log);
    const context = contextFor(spec);
    const tagged =
      (name: string): Interceptor =>
      (next) =>
      async (req) => {
        log.push(`${name} in`);
        req.header.set("x-added", name);
        req.contextValues.set(seen, name);
        const res = await next(req);
        res.header.set(`x-${name}`, "header");
        res.trailer.set(`x-${name}`, "trailer");
        if (!res.stream) return res;
        const messages = res.message;
        return {
          ...res,
          message: (async function* () {
            for await (const m of messages) {
              log.push(`${name} saw ${(m as HealthCheckResponse).status}`);
              yield m;
            }
            log.push(`${name} end`);
          })(),
        };
      };
    const out = await collect(
      invokeStreaming(spec, context, requests("svc"), [tagged("outer"), tagged("inner")]),
    );
    expect(
      out.map((m) => [isMessage(m, HealthCheckResponseSchema), (m as HealthCheckResponse).status]),
    ).toEqual([
      [true, 1],
      [true, 2],
    ]);
    expect(log).toEqual([
      "outer in",
      "inner in",
      "impl svc inner inner",
      "inner saw 1",
      "outer saw 1",
      "inner saw 2",
      "outer saw 2",
      "inner end",
      "outer end",
    ]);
    expect(context.responseHeader.get("x-outer")).toBe("header");
    expect(context.responseHeader.get("x-inner")).toBe("header");
    expect(context.responseTrailer.get("x-outer")).toBe("trailer");
  });

  it("refuses a request without its message, or with two, as connect does", async () => {
    for (const [services, message] of [
      [[], "protocol error: missing input message for server-streaming method"],
      [["a", "b"], "protocol error: received extra input message for server-streaming method"],
    ] as const) {
      const log: string[] = [];
      const spec = watchSpec(log);
      const err = await collect(
        invokeStreaming(spec, contextFor(spec), requests(...services), []),
      ).catch((e: unknown) => ConnectError.from(e));
      expect(err).toMatchObject({ code: Code.Unimplemented, rawMessage: message });
      expect(log).toEqual([]);
    }
  });

  it("lets an interceptor refuse the call before the implementation runs", async () => {
    const log: string[] = [];
    const spec = watchSpec(log);
    const refuse: Interceptor = () => async () => {
      throw new ConnectError("no", Code.PermissionDenied);
    };
    const err = await collect(
      invokeStreaming(spec, contextFor(spec), requests("svc"), [refuse]),
    ).catch((e: unknown) => ConnectError.from(e));
    expect(err).toMatchObject({ code: Code.PermissionDenied });
    expect(log).toEqual([]);
  });

  it("closes the implementation's outputs when the caller throws a write failure in", async () => {
    let closed = 0;
    const spec = createServiceImplSpec<typeof Health>(Health, {
      check: () => ({}),
      // Outputs that take no error (no throw method), only next and return.
      watch: () => ({
        [Symbol.asyncIterator]: () => ({
          next: async () => ({ done: false, value: { status: 1 } }),
          return: async () => {
            closed++;
            return { done: true, value: undefined };
          },
        }),
      }),
    }).methods.watch;
    if (spec?.kind !== "server_streaming") throw new Error("Watch is server-streaming");
    const it = invokeStreaming(spec, contextFor(spec), requests("svc"), [])[Symbol.asyncIterator]();
    await it.next();
    const failed = new ConnectError("the client read nothing", Code.DeadlineExceeded);
    await expect(it.throw?.(failed)).rejects.toBe(failed);
    expect(closed).toBe(1);
  });
});
