import { once } from "node:events";
import { createServer, type IncomingMessage, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { boundStoreRequest, storeTimeoutOf } from "./s3-request-timeout.js";

const mib = 1024 * 1024;
/** The bound under test: short, so that a transfer many times as long is quick to run. */
const timeoutMs = 500;

/** An HTTP server on loopback answering with `handler`, closed after each test. */
const servers: Server[] = [];
async function listen(
  handler: (req: IncomingMessage, res: import("node:http").ServerResponse) => void,
): Promise<number> {
  const server = createServer(handler);
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return (server.address() as AddressInfo).port;
}

afterEach(() => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
  }
});

/** POSTs `body` (or GETs when undefined) to `port`, reading the whole answer; its length. */
function exchange(port: number, signal: AbortSignal, body?: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, method: body === undefined ? "GET" : "POST", signal },
      (res) => {
        let length = 0;
        res.on("data", (chunk: Buffer) => {
          length += chunk.length;
        });
        res.on("end", () => resolve(length));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Resolves with the call's outcome and how long it took to settle. */
async function settle<T>(pending: Promise<T>) {
  const started = performance.now();
  try {
    return { value: await pending, ms: performance.now() - started };
  } catch (err) {
    return { err, ms: performance.now() - started };
  }
}

describe("boundStoreRequest", () => {
  it("fails a request the store never answers UNAVAILABLE, soon after the bound", async () => {
    let gone: Promise<unknown> | undefined;
    const port = await listen((req) => {
      req.resume();
      gone = once(req.socket, "close");
    });
    const { err, ms } = await settle(
      boundStoreRequest(timeoutMs, undefined, (signal) => exchange(port, signal)),
    );
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unavailable);
    expect((err as ConnectError).rawMessage).toBe("the object store did not answer within 0.5 s");
    expect(storeTimeoutOf(err)).toBe(err);
    expect(ms).toBeGreaterThanOrEqual(timeoutMs);
    // The request's socket is closed, not left to the library.
    await gone;
  });

  it("does not cut an upload the store takes slowly but steadily, for many times the bound", async () => {
    const size = 24 * mib;
    const port = await listen(async (req, res) => {
      let taken = 0;
      // 64 KiB every 4 ms at most: about 16 MB/s, so the upload lasts seconds.
      for await (const chunk of req) {
        taken += (chunk as Buffer).length;
        await sleep(4);
      }
      res.end(String(taken));
    });
    const { value, err, ms } = await settle(
      boundStoreRequest(timeoutMs, undefined, (signal) =>
        exchange(port, signal, Buffer.alloc(size, 7)),
      ),
    );
    expect(err).toBeUndefined();
    expect(value).toBe(String(size).length);
    expect(ms).toBeGreaterThan(2 * timeoutMs);
  });

  it("does not cut an answer the store sends slowly but steadily, for many times the bound", async () => {
    const size = 16 * mib;
    const port = await listen(async (_req, res) => {
      const piece = Buffer.alloc(64 * 1024, 3);
      for (let sent = 0; sent < size; sent += piece.length) {
        if (!res.write(piece)) await once(res, "drain");
        await sleep(4);
      }
      res.end();
    });
    const { value, err, ms } = await settle(
      boundStoreRequest(timeoutMs, undefined, (signal) => exchange(port, signal)),
    );
    expect(err).toBeUndefined();
    expect(value).toBe(size);
    expect(ms).toBeGreaterThan(2 * timeoutMs);
  });

  it("fails an answer that stops midway, once the bound passes without a byte", async () => {
    const port = await listen((_req, res) => {
      res.write(Buffer.alloc(1024, 1));
    });
    const { err, ms } = await settle(
      boundStoreRequest(timeoutMs, undefined, (signal) => exchange(port, signal)),
    );
    expect(storeTimeoutOf(err)).toBeDefined();
    expect(ms).toBeGreaterThanOrEqual(timeoutMs);
  });

  it("rejects at once with the caller's reason when the caller aborts", async () => {
    const port = await listen((req) => req.resume());
    const caller = new AbortController();
    const pending = settle(
      boundStoreRequest(60_000, caller.signal, (signal) => exchange(port, signal)),
    );
    await sleep(50);
    caller.abort(new ConnectError("the call was cancelled", Code.Canceled));
    const { err, ms } = await pending;
    expect((err as ConnectError).code).toBe(Code.Canceled);
    expect(storeTimeoutOf(err)).toBeUndefined();
    expect(ms).toBeLessThan(10_000);
  });
});
