import { readFile } from "node:fs/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/test-server.js";
import { createSpillwayClient, type SpillwayClient } from "./client.js";

/**
 * The client side of the established TCP connections to port, from the kernel's table: rows
 * whose remote end is the server's port (the server's own ends have it as their local port).
 */
async function connectionsTo(port: number): Promise<number> {
  const rows = (await readFile("/proc/net/tcp", "utf8")).split("\n").slice(1);
  const remote = `:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  return rows.filter((row) => {
    const [, , rem, state] = row.trim().split(/\s+/);
    return rem?.endsWith(remote) === true && state === "01";
  }).length;
}

/** Waits until there are `want` connections to port, for up to 2 s; resolves to the last count. */
async function settle(port: number, want: number): Promise<number> {
  const until = Date.now() + 2_000;
  let count = await connectionsTo(port);
  while (count !== want && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    count = await connectionsTo(port);
  }
  return count;
}

/** The error a promise rejects with, or a failure if it resolves. */
async function refusal(work: Promise<unknown>): Promise<ConnectError> {
  const err = await work.then(
    () => new Error("resolved"),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConnectError);
  return err as ConnectError;
}

describe("SpillwayClient.close", () => {
  let t: TestServer;
  let port = 0;
  const key = (callId: string) => ({ tenant: "dev", runId: "close", callId });

  beforeAll(async () => {
    t = await startTestServer({ backend: "memory" });
    port = Number(new URL(t.url).port);
    await createSpillwayClient({ baseUrl: t.url }).offload(key("seed"), "x".repeat(100_000));
  });
  afterAll(async () => {
    await t.stop();
  });

  it("releases every connection of clients used once, HTTP/1.1 bulk reads' too", async () => {
    const before = await connectionsTo(port);
    const clients: SpillwayClient[] = [];
    for (let i = 0; i < 20; i++) {
      const client = createSpillwayClient({ baseUrl: t.url });
      await client.offload(key(`once-${i}`), `output ${i}`);
      await client.readToolOutput({ runId: "close", handle: `res_once-${i}` });
      clients.push(client);
    }
    const bulk = createSpillwayClient({ baseUrl: t.url, bulkReads: "http1" });
    for await (const _ of bulk.readBytes("close", "res_seed")) {
      // Read through to the end, over an HTTP/1.1 keep-alive connection.
    }
    await bulk.stat("close", "res_seed");
    clients.push(bulk);
    // One HTTP/2 connection each, and the bulk reader's HTTP/1.1 one beside its HTTP/2 one.
    expect(await settle(port, before + 22)).toBe(before + 22);
    await Promise.all(clients.map((c) => c.close()));
    expect(await settle(port, before)).toBe(before);
  });

  it("refuses every call after close with CANCELED, opening no connection", async () => {
    const client = createSpillwayClient({ baseUrl: t.url, bulkReads: "http1" });
    await client.serverInfo();
    const before = await connectionsTo(port);
    await client.close();
    await client.close();
    const calls: [string, () => Promise<unknown>][] = [
      ["offload", () => client.offload(key("late"), "late")],
      ["offload stream", () => client.offload(key("late-stream"), "x".repeat(100_000))],
      ["readToolOutput", () => client.readToolOutput({ runId: "close", handle: "res_seed" })],
      ["readBytes", () => client.readBytes("close", "res_seed").next()],
      ["stat", () => client.stat("close", "res_seed")],
      ["list", () => client.list("close")],
      ["serverInfo", () => client.serverInfo()],
      ["raw", () => client.raw.getServerInfo({})],
    ];
    for (const [name, call] of calls) {
      const err = await refusal(call());
      expect(err.code, name).toBe(Code.Canceled);
      expect(err.rawMessage, name).toBe("the Spillway client was closed");
    }
    expect(await settle(port, before - 1)).toBe(before - 1);
  });

  it("cancels the calls in flight, at once and without retrying them", async () => {
    const client = createSpillwayClient({ baseUrl: t.url, retry: { baseDelayMs: 5_000 } });
    async function* endless(): AsyncGenerator<Uint8Array> {
      yield Buffer.from("the first chunk\n");
      await new Promise(() => {});
    }
    const inFlight = client.offload(key("in-flight"), endless());
    await client.serverInfo();
    const started = Date.now();
    await client.close();
    const err = await refusal(inFlight);
    expect(err.code).toBe(Code.Canceled);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("cancels a bulk read over HTTP/1.1 in flight, at once", async () => {
    await createSpillwayClient({ baseUrl: t.url }).offload(key("large"), "y".repeat(32 << 20));
    const client = createSpillwayClient({
      baseUrl: t.url,
      bulkReads: "http1",
      retry: { baseDelayMs: 5_000 },
    });
    const read = client.readBytes("close", "res_large");
    await read.next();
    const started = Date.now();
    await client.close();
    const drained = (async () => {
      while (!(await read.next()).done) {}
    })();
    expect((await refusal(drained)).code).toBe(Code.Canceled);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("is what await using calls, and leaves a client given a transport refusing calls", async () => {
    const before = await connectionsTo(port);
    {
      await using client = createSpillwayClient({ baseUrl: t.url });
      await client.serverInfo();
      expect(await settle(port, before + 1)).toBe(before + 1);
    }
    expect(await settle(port, before)).toBe(before);
    // The caller's transport is the caller's to close; the client only stops using it.
    const transport = createGrpcTransport({ baseUrl: t.url });
    const given = createSpillwayClient({ baseUrl: t.url, transport });
    await given.serverInfo();
    await given[Symbol.asyncDispose]();
    expect((await refusal(given.serverInfo())).code).toBe(Code.Canceled);
  });
});
