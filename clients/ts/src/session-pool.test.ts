import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSpillwayClient } from "./client.js";
import { createWideWindowSessionManager } from "./session-manager.js";
import { createSessionPool } from "./session-pool.js";

describe("createSessionPool", () => {
  let server: http2.Http2Server;
  let url = "";
  /** The server's sessions, in the order they connected, with the streams each opened. */
  const sessions: { session: http2.ServerHttp2Session; streams: number }[] = [];
  /** Streams the server holds open until the test ends them. */
  const held: http2.ServerHttp2Stream[] = [];
  beforeAll(async () => {
    server = http2.createServer();
    server.on("session", (session) => sessions.push({ session, streams: 0 }));
    server.on("stream", (stream) => {
      const entry = sessions.find((s) => s.session === stream.session);
      if (entry !== undefined) entry.streams++;
      stream.respond({ ":status": 200 });
      held.push(stream);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const { session } of sessions) session.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  const open = (pool: ReturnType<typeof createSessionPool>) => pool.request("POST", "/", {}, {});
  const streamsPerSession = () => sessions.map((s) => s.streams);

  it("starts each call on the connection with the fewest calls open", async () => {
    const pool = createSessionPool([
      createWideWindowSessionManager(url),
      createWideWindowSessionManager(url),
    ]);
    const first = await open(pool);
    const second = await open(pool);
    await new Promise((resolve) => setTimeout(resolve, 50));
    // One call on each connection.
    expect(streamsPerSession()).toEqual([1, 1]);
    const third = await open(pool);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(streamsPerSession()).toEqual([2, 1]);
    // Once the second connection's call is over it has none open: the next two calls go there.
    second.close();
    await new Promise((resolve) => second.once("close", resolve));
    const fourth = await open(pool);
    const fifth = await open(pool);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(streamsPerSession()).toEqual([2, 3]);
    for (const stream of [fourth, fifth]) stream.close();
    for (const stream of [first, third]) stream.close();
  });

  it("is the connection itself when it has one, and refuses none or two servers", () => {
    const only = createWideWindowSessionManager(url);
    expect(createSessionPool([only])).toBe(only);
    expect(() => createSessionPool([])).toThrow(ConnectError);
    const mixed = () =>
      createSessionPool([
        createWideWindowSessionManager(url),
        createWideWindowSessionManager("http://127.0.0.1:1"),
      ]);
    expect(mixed).toThrow(expect.objectContaining({ code: Code.InvalidArgument }));
  });
});

describe("createSpillwayClient's connections option", () => {
  it("holds one connection for one call at a time and up to four for calls at once", async () => {
    // A gRPC server answering every call, after a pause, with an empty message and status OK.
    const seen: http2.ServerHttp2Session[] = [];
    const grpc = http2.createServer();
    grpc.on("session", (session) => seen.push(session));
    grpc.on("stream", (stream) => {
      stream.on("data", () => {});
      setTimeout(() => {
        stream.respond(
          { ":status": 200, "content-type": "application/grpc" },
          {
            waitForTrailers: true,
          },
        );
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(Buffer.alloc(5));
      }, 20);
    });
    await new Promise<void>((resolve) => grpc.listen(0, "127.0.0.1", resolve));
    const client = createSpillwayClient({
      baseUrl: `http://127.0.0.1:${(grpc.address() as AddressInfo).port}`,
    });
    try {
      for (let i = 0; i < 5; i++) await client.raw.getServerInfo({});
      expect(seen).toHaveLength(1);
      await Promise.all(Array.from({ length: 8 }, () => client.raw.getServerInfo({})));
      expect(seen).toHaveLength(4);
    } finally {
      for (const session of seen) session.destroy();
      await new Promise((resolve) => grpc.close(resolve));
    }
  });

  it("refuses a count that is not a whole number from 1 to 64", () => {
    for (const connections of [0, 1.5, 65, Number.NaN]) {
      expect(() => createSpillwayClient({ baseUrl: "http://127.0.0.1:1", connections })).toThrow(
        expect.objectContaining({ code: Code.InvalidArgument }),
      );
    }
    expect(() =>
      createSpillwayClient({ baseUrl: "http://127.0.0.1:1", connections: 4 }),
    ).not.toThrow();
  });
});
