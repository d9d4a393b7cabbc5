import * as http from "node:http";
import type { AddressInfo } from "node:net";
import {
  Code,
  ConnectError,
  createClient,
  createContextKey,
  createServiceImplSpec,
  type Interceptor,
} from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { Health } from "@spillway/proto/grpc/health/v1/health_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGrpcWebHandler } from "./grpc-web-handler.js";

const gateSaw = createContextKey<string>("", { description: "what the request gate saw" });

describe("the direct gRPC-Web path over HTTP/1.1", () => {
  let server: http.Server;
  let url: string;
  let checks = 0;
  let declined = 0;
  const endings: unknown[] = [];
  const intercepted: string[] = [];
  const interceptor: Interceptor = (next) => async (req) => {
    intercepted.push(req.method.name);
    const res = await next(req);
    res.header.set("x-intercepted", "yes");
    return res;
  };
  beforeAll(async () => {
    const handler = createGrpcWebHandler(
      {
        interceptors: [interceptor],
        requestGate: (ctx) => {
          const token = ctx.requestHeader.get("x-gate");
          if (token !== "open") {
            throw new ConnectError("the gate is closed", Code.PermissionDenied);
          }
          ctx.values.set(gateSaw, token);
        },
      },
      {
        services: [
          createServiceImplSpec<typeof Health>(Health, {
            check(req, ctx) {
              checks++;
              if (req.service === "fail") throw new ConnectError("no such service", Code.NotFound);
              return { status: ctx.values.get(gateSaw) === "open" ? 1 : 0 };
            },
            async *watch(req, ctx) {
              ctx.signal.addEventListener("abort", () => endings.push(ctx.signal.reason), {
                once: true,
              });
              const count = req.service === "endless" ? Number.MAX_SAFE_INTEGER : 3;
              for (let i = 0; i < count; i++) {
                yield { status: 1 };
                await new Promise((r) => setTimeout(r, 5));
              }
              if (req.service === "fail") throw new ConnectError("gone", Code.Unavailable);
            },
          }),
        ],
        wire: { framer: () => undefined },
      },
    );
    server = http.createServer((req, res) => {
      if (handler(req, res)) return;
      declined++;
      res.writeHead(415).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const client = () =>
    createClient(Health, createGrpcWebTransport({ baseUrl: url, httpVersion: "1.1" }));

  it("answers a unary call through the gate and the interceptors", async () => {
    let header: Headers | undefined;
    const res = await client().check(
      {},
      { headers: { "x-gate": "open" }, onHeader: (h) => (header = h) },
    );
    expect(res.status).toBe(1);
    expect(header?.get("x-intercepted")).toBe("yes");
    expect(intercepted).toContain("Check");
  });

  it("refuses a call with the gate's error before the implementation runs", async () => {
    const before = checks;
    const err = await client()
      .check({})
      .catch((e: unknown) => ConnectError.from(e));
    expect(err).toMatchObject({ code: Code.PermissionDenied, rawMessage: "the gate is closed" });
    expect(checks).toBe(before);
  });

  it("carries a handler's error in the trailer frame", async () => {
    const err = await client()
      .check({ service: "fail" }, { headers: { "x-gate": "open" } })
      .catch((e: unknown) => ConnectError.from(e));
    expect(err).toMatchObject({ code: Code.NotFound, rawMessage: "no such service" });
  });

  it("streams every message, then the status; an error after messages keeps them", async () => {
    const got: number[] = [];
    for await (const m of client().watch({}, { headers: { "x-gate": "open" } })) got.push(m.status);
    expect(got).toEqual([1, 1, 1]);
    const before: number[] = [];
    const err = await (async () => {
      for await (const m of client().watch(
        { service: "fail" },
        { headers: { "x-gate": "open" } },
      )) {
        before.push(m.status);
      }
    })().catch((e: unknown) => ConnectError.from(e));
    expect(before).toEqual([1, 1, 1]);
    expect(err).toMatchObject({ code: Code.Unavailable, rawMessage: "gone" });
  });

  it("aborts a streaming call's signal with CANCELED when the client goes away", async () => {
    const abort = new AbortController();
    const stream = client().watch(
      { service: "endless" },
      { headers: { "x-gate": "open" }, signal: abort.signal },
    );
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    const seen = endings.length;
    abort.abort();
    await it.next().catch(() => undefined);
    for (let i = 0; i < 100 && endings.length === seen; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(ConnectError.from(endings.at(-1)).code).toBe(Code.Canceled);
  });

  it("reads out a request it refused, so the connection carries the next call", async () => {
    // One connection for every call: a refused request left unread would hold it.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const one = createClient(
      Health,
      createGrpcWebTransport({ baseUrl: url, httpVersion: "1.1", nodeOptions: { agent } }),
    );
    const headers = { "x-gate": "open" };
    try {
      for (const size of [8 * 1024 * 1024, 100]) {
        const err = await one
          .check({ service: "x".repeat(size) }, { headers: { "x-gate": "shut" }, timeoutMs: 5000 })
          .then(
            () => undefined,
            (e: unknown) => ConnectError.from(e),
          );
        expect(err?.code).toBe(Code.PermissionDenied);
        const got: number[] = [];
        for await (const m of one.watch({}, { headers, timeoutMs: 5000 })) got.push(m.status);
        expect(got).toEqual([1, 1, 1]);
      }
    } finally {
      agent.destroy();
    }
  });

  it("leaves gRPC-Web text and other protocols to the next handler", async () => {
    const before = declined;
    for (const contentType of ["application/grpc-web-text", "application/json"]) {
      const res = await fetch(`${url}/grpc.health.v1.Health/Check`, {
        method: "POST",
        headers: { "content-type": contentType },
        body: "",
      });
      expect(res.status).toBe(415);
    }
    expect(declined).toBe(before + 2);
  });
});
