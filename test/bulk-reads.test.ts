import { randomBytes } from "node:crypto";
import * as http2 from "node:http2";
import * as net from "node:net";
import { Code } from "@connectrpc/connect";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf, failureOf } from "./support/code-of.js";
import { listenLoopback } from "./support/listen-loopback.js";
import { sha256 } from "./support/read-back.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** How a proxy treats a connection that does not open with HTTP/2's preface. */
type Http1Answer = "forward" | "not-found" | "h2c-only";

/** A TCP proxy in front of a server that counts the connections of each protocol. */
interface CountingProxy {
  readonly url: string;
  /** Connections opened, by the protocol their first bytes speak. */
  readonly opened: { http1: number; http2: number };
  close(): Promise<void>;
}

const http2Preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/**
 * startCountingProxy forwards every connection to `target` as it is, except that an HTTP/1.1
 * connection gets `http1`: forwarded too, answered 404 as a proxy without a route for it does,
 * or handed to `h2cOnly`, a real HTTP/2-only server.
 */
async function startCountingProxy(
  target: string,
  http1: Http1Answer,
  h2cOnly?: string,
): Promise<CountingProxy> {
  const opened = { http1: 0, http2: 0 };
  const sockets = new Set<net.Socket>();
  const pipeTo = (client: net.Socket, first: Buffer, url: string) => {
    const { hostname, port } = new URL(url);
    const upstream = net.connect(Number(port), hostname);
    upstream.write(first);
    client.pipe(upstream).pipe(client);
    sockets.add(upstream);
    upstream.on("close", () => client.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
  };
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on("error", () => {});
    client.once("data", (first: Buffer) => {
      const h2 = first.subarray(0, http2Preface.length).equals(http2Preface);
      if (h2) opened.http2++;
      else opened.http1++;
      if (h2 || http1 === "forward") pipeTo(client, first, target);
      else if (http1 === "h2c-only" && h2cOnly !== undefined) pipeTo(client, first, h2cOnly);
      else {
        client.end(
          "HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: 10\r\n\r\nnot found\n",
        );
      }
    });
  });
  const url = await listenLoopback(server);
  return {
    url,
    opened,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Every byte of a readBytes call, joined. */
async function readAll(
  client: SpillwayClient,
  runId: string,
  handle: string,
  range?: { offset?: number; length?: number },
  verify = false,
): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of client.readBytes(runId, handle, range, { verify })) {
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

/**
 * With bulkReads "http1" the SDK reads payload bytes as gRPC-Web over HTTP/1.1 (what the CLI's
 * cat does), and everything else over HTTP/2; a server or proxy that does not answer gRPC-Web
 * over HTTP/1.1 sends it back to HTTP/2 for good, the read itself intact.
 */
describe("bulk reads over HTTP/1.1", () => {
  let server: TestServer;
  let h2cOnly: http2.Http2Server;
  let h2cOnlyUrl: string;
  const payload = randomBytes(24 * 1024 * 1024 + 12_345);
  let handle: string;

  beforeAll(async () => {
    server = await startTestServer();
    const stored = await server
      .sdk()
      .offload({ tenant: "dev", runId: "bulk", callId: "payload" }, payload);
    handle = stored.handle;
    h2cOnly = http2.createServer((_req, res) => res.end());
    h2cOnlyUrl = await listenLoopback(h2cOnly as unknown as net.Server);
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => h2cOnly.close(() => resolve()));
    await server.stop();
  });

  it("reads whole payloads and ranges over one kept-alive HTTP/1.1 connection", async () => {
    const proxy = await startCountingProxy(server.url, "forward");
    try {
      const client = createSpillwayClient({ baseUrl: proxy.url, bulkReads: "http1" });
      expect(sha256(await readAll(client, "bulk", handle))).toBe(sha256(payload));
      expect(sha256(await readAll(client, "bulk", handle, {}, true))).toBe(sha256(payload));
      const range = { offset: 3 * 1024 * 1024 + 7, length: 5 * 1024 * 1024 + 3 };
      expect(
        (await readAll(client, "bulk", handle, range)).equals(
          payload.subarray(range.offset, range.offset + range.length),
        ),
      ).toBe(true);
      // The bytes went over one HTTP/1.1 connection, reused; verify's stat over HTTP/2.
      expect(proxy.opened).toEqual({ http1: 1, http2: 1 });
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it("fails a read over HTTP/1.1 with the code it fails with over HTTP/2", async () => {
    const over = (bulkReads: "http1" | "http2") =>
      createSpillwayClient({ baseUrl: server.url, bulkReads, retry: { maxAttempts: 1 } });
    const codes = async (bulkReads: "http1" | "http2") => {
      const client = over(bulkReads);
      return [
        await codeOf(readAll(client, "bulk", "res_missing")),
        await codeOf(readAll(client, "bulk", "../escape")),
        await codeOf(readAll(client, "no-such-run", handle)),
        await codeOf(readAll(client, "bulk\u0007", handle)),
      ];
    };
    const overHttp2 = await codes("http2");
    expect(overHttp2).toEqual([
      Code.PermissionDenied,
      Code.PermissionDenied,
      Code.PermissionDenied,
      Code.InvalidArgument,
    ]);
    expect(await codes("http1")).toEqual(overHttp2);
    const slow = over("http1").readBytes("bulk", handle, {}, { timeoutMs: 50 });
    const late = (async () => {
      for await (const _ of slow) await new Promise((r) => setTimeout(r, 20));
    })();
    expect((await failureOf(late)).code).toBe(Code.DeadlineExceeded);
  }, 60_000);

  it("lets a reader stop early, and reads again on a fresh connection", async () => {
    const proxy = await startCountingProxy(server.url, "forward");
    try {
      const client = createSpillwayClient({ baseUrl: proxy.url, bulkReads: "http1" });
      let seen = 0;
      for await (const chunk of client.readBytes("bulk", handle)) {
        seen += chunk.byteLength;
        if (seen > 1024 * 1024) break;
      }
      expect(sha256(await readAll(client, "bulk", handle))).toBe(sha256(payload));
      // The abandoned response's connection was closed, not handed to the next read.
      expect(proxy.opened.http1).toBe(2);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it.each([
    ["a proxy that answers HTTP/1.1 with 404", "not-found"],
    ["an HTTP/2-only server", "h2c-only"],
  ] as const)(
    "falls back to HTTP/2 for good behind %s",
    async (_, answer) => {
      const proxy = await startCountingProxy(server.url, answer, h2cOnlyUrl);
      try {
        const client = createSpillwayClient({ baseUrl: proxy.url, bulkReads: "http1" });
        expect(sha256(await readAll(client, "bulk", handle))).toBe(sha256(payload));
        expect(sha256(await readAll(client, "bulk", handle))).toBe(sha256(payload));
        expect(proxy.opened).toEqual({ http1: 1, http2: 1 });
      } finally {
        await proxy.close();
      }
    },
    60_000,
  );
});
