import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import {
  Code,
  ConnectError,
  createClient,
  createContextKey,
  createServiceImplSpec,
} from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Health } from "@spillway/proto/grpc/health/v1/health_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGrpcNodeHandler } from "./grpc-node-handler.js";

const gateSaw = createContextKey<string>("", { description: "what the request gate saw" });

describe("the direct gRPC path's request gate", () => {
  let server: http2.Http2Server;
  let url: string;
  let calls = 0;
  // The clients keep their connections open; they are closed with the server.
  const sessions: http2.ServerHttp2Session[] = [];
  beforeAll(async () => {
    const handler = createGrpcNodeHandler(
      {
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
            check(_req, ctx) {
              calls++;
              return { status: ctx.values.get(gateSaw) === "open" ? 1 : 0 };
            },
          }),
        ],
        wire: { framer: () => undefined },
      },
    );
    server = http2.createServer((req, res) => {
      if (!handler(req, res)) res.writeHead(404).end();
    });
    server.on("session", (session) => sessions.push(session));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it("refuses a call with the gate's error before the implementation runs", async () => {
    const client = createClient(Health, createGrpcTransport({ baseUrl: url }));
    const err = await client.check({}).catch((e: unknown) => ConnectError.from(e));
    expect(err).toMatchObject({ code: Code.PermissionDenied, rawMessage: "the gate is closed" });
    expect(calls).toBe(0);
  });

  it("lets a call through with the context values the gate set", async () => {
    const client = createClient(Health, createGrpcTransport({ baseUrl: url }));
    const res = await client.check({}, { headers: { "x-gate": "open" } });
    expect(res.status).toBe(1);
    expect(calls).toBe(1);
  });
});
