import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSpillwayClient } from "./client.js";

describe("createWideWindowSessionManager", () => {
  let server: http2.Http2Server;
  let url = "";
  const sessions: http2.ServerHttp2Session[] = [];
  beforeAll(async () => {
    // A peer slower than its client: it reads no offload's body (its flow control holds them)
    // and answers every other call at once, NOT_FOUND.
    server = http2.createServer({ settings: { initialWindowSize: 65_536 } });
    server.on("session", (session) => sessions.push(session));
    server.on("stream", (stream, headers) => {
      if (String(headers[":path"]).endsWith("/Offload")) {
        stream.pause();
        return;
      }
      stream.respond(
        { ":status": 200, "content-type": "application/grpc" },
        { waitForTrailers: true },
      );
      stream.on("wantTrailers", () =>
        stream.sendTrailers({ "grpc-status": "5", "grpc-message": "answered" }),
      );
      stream.end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it("takes the server's answers while many offloads' chunks wait to be sent", async () => {
    const spillway = createSpillwayClient({
      baseUrl: url,
      connections: 1,
      retry: { maxAttempts: 1 },
    });
    const payload = new Uint8Array(4 << 20).fill(120);
    const offloads = Array.from({ length: 40 }, (_, i) =>
      spillway.offload({ tenant: "dev", runId: "r", callId: `c${i}` }, payload).catch(() => {}),
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    // With Node's default of 10 MB a session, the queued chunks passed it and the client
    // refused this answer: RESOURCE_EXHAUSTED, ENHANCE_YOUR_CALM.
    const answer = await spillway
      .stat("r", "res_x", { timeoutMs: 5_000 })
      .catch((err: unknown) => err);
    expect(answer).toBeInstanceOf(ConnectError);
    expect((answer as ConnectError).code).toBe(Code.NotFound);
    expect((answer as ConnectError).rawMessage).toBe("answered");
    await spillway.close();
    await Promise.all(offloads);
  });
});
