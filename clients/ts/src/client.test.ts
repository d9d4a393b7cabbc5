import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { Storage } from "@spillway/proto/spillway/v1/types_pb.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { sha256 } from "../../../test/support/read-back.js";
import { startTestServer, type TestServer } from "../../../test/support/test-server.js";
import { createSpillwayClient, type SpillwayClient } from "./client.js";

type Fault = "before" | "after" | "none";

/**
 * faultyOffloads fails Offload and OffloadBatch calls at the wire boundary, one planned fault
 * per call: "before" refuses the call without sending it, "after" lets it commit and then loses
 * the response.
 */
function faultyOffloads(plan: Fault[]): Interceptor {
  return (next) => async (req) => {
    if (req.method.name !== "Offload" && req.method.name !== "OffloadBatch") return next(req);
    const fault = plan.shift() ?? "none";
    if (fault === "before") throw new ConnectError("injected before send", Code.Unavailable);
    const res = await next(req);
    if (fault === "after") {
      if (res.stream) {
        for await (const _ of res.message) {
          // Drained so the server has committed before the response is "lost".
        }
      }
      throw new ConnectError("injected after commit", Code.Unavailable);
    }
    return res;
  };
}

/**
 * cutReads ends ReadToolOutput responses with UNAVAILABLE after the number of messages its
 * plan gives for each call (a replica lost mid-stream); calls past the plan run whole.
 */
function cutReads(plan: number[], calls: { count: number }): Interceptor {
  return (next) => async (req) => {
    if (req.method.name !== "ReadToolOutput") return next(req);
    calls.count++;
    const after = plan.shift();
    const res = await next(req);
    if (after === undefined || !res.stream) return res;
    const messages = res.message;
    async function* cut() {
      let n = 0;
      for await (const message of messages) {
        if (n++ === after) throw new ConnectError("injected: replica lost", Code.Unavailable);
        yield message;
      }
    }
    return { ...res, message: cut() };
  };
}

/** filesOfSize lists the regular files under dir that are exactly `size` bytes long. */
async function filesOfSize(dir: string, size: number): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isFile() && (await stat(path)).size === size) found.push(path);
  }
  return found;
}

/** Everything readBytes yields, joined, and how many pieces it came in. */
async function readAll(
  chunks: AsyncIterable<Uint8Array>,
): Promise<{ bytes: Buffer; pieces: number }> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return { bytes: Buffer.concat(parts), pieces: parts.length };
}

async function codeOf(p: Promise<unknown>): Promise<Code | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return err instanceof ConnectError ? err.code : undefined;
  }
}

async function* stream(...parts: string[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield Buffer.from(part);
}

describe("SpillwayClient", () => {
  let t: TestServer;
  let sdk: SpillwayClient;
  const key = (runId: string, callId: string) => ({ tenant: "dev", runId, callId });

  beforeAll(async () => {
    t = await startTestServer();
    sdk = createSpillwayClient({ baseUrl: t.url });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("sends a streamed chunk before asking for the next, so the caller may reuse its buffer", async () => {
    const buffer = Buffer.alloc(4 * 1024);
    const expected: Buffer[] = [];
    async function* reused(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < 40; i++) {
        buffer.fill(`chunk ${i} `);
        expected.push(Buffer.from(buffer));
        yield buffer;
      }
    }
    const attachment = await sdk.offload(key("c0", "reuse"), reused());
    expect(attachment.sha256).toBe(sha256(Buffer.concat(expected)));
  });

  it("offloads, stats and reports whether a call created the record", async () => {
    const first = await sdk.offloadResult(key("c1", "a"), "alpha\nbeta\n", { name: "ls" });
    const again = await sdk.offloadResult(key("c1", "a"), "alpha\nbeta\n", { name: "ls" });
    expect(first.created).toBe(true);
    expect(again.created).toBe(false);
    expect(again.attachment.sha256).toBe(first.attachment.sha256);
    const stat = await sdk.stat("c1", "res_a");
    expect(stat.handle).toBe("res_a");
    expect(stat.lineCount).toBe(2n);
    expect(stat.name).toBe("ls");
  });

  it("refuses data with no JSON text, or that JSON cannot write, before any call", async () => {
    let calls = 0;
    const counted = createSpillwayClient({
      baseUrl: t.url,
      interceptors: [
        (next) => (req) => {
          calls++;
          return next(req);
        },
      ],
    });
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const refused: [unknown, RegExp][] = [
      [undefined, /^offload: the JSON value is undefined, which has no JSON text/],
      [() => 1, /^offload: the JSON value is a function, which has no JSON text/],
      [Symbol("x"), /^offload: the JSON value is a symbol, which has no JSON text/],
      [{ toJSON: () => undefined }, /^offload: the JSON value is an object whose toJSON/],
      [10n, /^offload: the JSON value cannot be written as JSON: .*BigInt/],
      [cycle, /^offload: the JSON value cannot be written as JSON: .*circular/],
    ];
    for (const [json, message] of refused) {
      const err = await counted.offload(key("cj", "c"), { json }).catch((e: unknown) => e);
      expect(err, String(json)).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code, String(json)).toBe(Code.InvalidArgument);
      expect((err as ConnectError).rawMessage, String(json)).toMatch(message);
    }
    // Untyped JavaScript can pass anything; what offload does not take is named, not a TypeError.
    for (const data of [undefined, null, 42, { text: "x" }]) {
      const err = await counted
        .offload(key("cj", "c"), data as unknown as string)
        .catch((e: unknown) => e);
      expect((err as ConnectError).code, String(data)).toBe(Code.InvalidArgument);
      expect((err as ConnectError).rawMessage).toMatch(/^offload: data must be bytes, a string/);
    }
    expect(calls).toBe(0);
    // null is a JSON value (a tool that returned nothing, said in JSON): stored as `null`.
    const stored = await counted.offload(key("cj", "null"), { json: null });
    expect(stored.sizeBytes).toBe(4n);
    expect(calls).toBe(1);
  });

  it("retries a stat whose replica was lost, and never one that was refused", async () => {
    await sdk.offload(key("c1s", "a"), "alpha\n");
    let stats = 0;
    const lostOnce: Interceptor = (next) => async (req) => {
      if (req.method.name !== "StatToolOutput") return next(req);
      if (stats++ === 0) throw new ConnectError("injected: replica lost", Code.Unavailable);
      return next(req);
    };
    const client = createSpillwayClient({
      baseUrl: t.url,
      interceptors: [lostOnce],
      retry: { baseDelayMs: 1 },
    });
    expect((await client.stat("c1s", "res_a")).handle).toBe("res_a");
    expect(stats).toBe(2);
    stats = 1;
    expect(await codeOf(client.stat("c1s", "res_missing"))).toBe(Code.PermissionDenied);
    expect(stats).toBe(2);
  });

  it("lists one page at a time and all pages with listAll", async () => {
    for (let i = 0; i < 5; i++) await sdk.offload(key("c2", `call${i}`), `output ${i}\n`);
    const page = await sdk.list("c2", { pageSize: 2 });
    expect(page.attachments.map((a) => a.handle)).toEqual(["res_call0", "res_call1"]);
    expect(page.nextPageToken).not.toBe("");
    const next = await sdk.list("c2", { pageSize: 2, pageToken: page.nextPageToken });
    expect(next.attachments.map((a) => a.handle)).toEqual(["res_call2", "res_call3"]);
    const all: string[] = [];
    for await (const a of sdk.listAll("c2", { pageSize: 2 })) all.push(a.handle);
    expect(all).toEqual(["res_call0", "res_call1", "res_call2", "res_call3", "res_call4"]);
  });

  it("lists the tenant's runs a page at a time and all of them with listAllRuns", async () => {
    const own = await startTestServer();
    try {
      const client = createSpillwayClient({ baseUrl: own.url });
      for (let i = 0; i < 5; i++) await client.offload(key(`lr${i}`, "c"), `run ${i}\n`);
      await client.offload(key("lr0", "d"), "more\n");
      await client.forkRun("lr0", "lr-fork", { ttlSeconds: 600 });
      const page = await client.listRuns({ pageSize: 2 });
      expect(page.runs).toHaveLength(2);
      expect(page.nextPageToken).not.toBe("");
      const all = [];
      for await (const run of client.listAllRuns({ pageSize: 2 })) all.push(run);
      expect(all.map((r) => r.runId).sort()).toEqual([
        "lr-fork",
        "lr0",
        "lr1",
        "lr2",
        "lr3",
        "lr4",
      ]);
      const byId = new Map(all.map((r) => [r.runId, r]));
      expect(byId.get("lr0")).toMatchObject({ outputCount: 2n, sizeBytes: 11n, parentRunId: "" });
      expect(byId.get("lr0")?.expireTime).toBeUndefined();
      expect(byId.get("lr-fork")).toMatchObject({ outputCount: 2n, parentRunId: "lr0" });
      expect(byId.get("lr-fork")?.expireTime).toBeDefined();
      expect(await codeOf(client.listRuns({ pageToken: "forged" }))).toBe(Code.InvalidArgument);
      expect(await codeOf(client.listRuns({ pageSize: 1001 }))).toBe(Code.InvalidArgument);
    } finally {
      await own.stop();
    }
  });

  it("forks, expires and deletes runs", async () => {
    await sdk.offload(key("c3", "x"), "parent output\n");
    const fork = await sdk.forkRun("c3", "c3-child", { ttlSeconds: 3600 });
    expect(fork.forkedAttachments).toBe(1n);
    expect((await sdk.stat("c3-child", "res_x")).handle).toBe("res_x");
    const ttl = await sdk.setRunTtl("c3", 600);
    expect(ttl.expireTime).toBeDefined();
    expect(await codeOf(sdk.forkRun("c3", "c3-child"))).toBe(Code.AlreadyExists);
    const deleted = await sdk.deleteRun("c3");
    expect(deleted.deletedAttachments).toBe(1n);
    expect(await codeOf(sdk.stat("c3", "res_x"))).toBe(Code.PermissionDenied);
    const child = await sdk.readToolOutput({ runId: "c3-child", handle: "res_x" });
    expect(child.rendered).toContain("parent output");
  });

  it("describes the server", async () => {
    const info = await sdk.serverInfo();
    expect(info.backend).toBe("filesystem");
    expect(info.caps?.maxWindowLines).toBeGreaterThan(0);
  });

  it("passes cancellation and deadlines through", async () => {
    expect(await codeOf(sdk.stat("c1", "res_a", { signal: AbortSignal.abort() }))).toBe(
      Code.Canceled,
    );
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    async function* stalled(): AsyncGenerator<Uint8Array> {
      yield Buffer.from("started\n");
      await held;
    }
    const code = await codeOf(sdk.offload(key("c4", "slow"), stalled(), {}, { timeoutMs: 300 }));
    release();
    expect(code).toBe(Code.DeadlineExceeded);
    expect(await codeOf(sdk.stat("c4", "res_slow"))).toBe(Code.PermissionDenied);
  });

  it("resets, never ends, the request of a streamed offload its deadline or signal cut off", async () => {
    // A server that reads every request and never answers; it records how each one ended.
    const seen: { ended: boolean; rstCode: number }[] = [];
    const server = http2.createServer();
    server.on("session", (session) => session.on("error", () => {}));
    server.on("stream", (stream) => {
      const entry = { ended: false, rstCode: -1 };
      seen.push(entry);
      stream.on("error", () => {});
      stream.on("data", () => {});
      // Node ends a stream's readable side when it is reset too, after closing it: only an end
      // that comes while the stream is open was the client's END_STREAM.
      stream.on("end", () => {
        if (!stream.closed) entry.ended = true;
      });
      stream.on("close", () => {
        entry.rstCode = stream.rstCode;
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const silent = createSpillwayClient({ baseUrl, retry: { maxAttempts: 1 } });
    async function* stalled(): AsyncGenerator<Uint8Array> {
      yield Buffer.from("the first part of a tool's output\n");
      await new Promise(() => {});
    }
    try {
      const ends = [
        await codeOf(silent.offload(key("cut", "timeout"), stalled(), {}, { timeoutMs: 300 })),
        await codeOf(
          silent.offload(key("cut", "signal"), stalled(), {}, { signal: AbortSignal.timeout(300) }),
        ),
      ];
      expect(ends).toEqual([Code.DeadlineExceeded, Code.Canceled]);
      await vi.waitUntil(() => seen.length === 2 && seen.every((e) => e.rstCode >= 0), {
        timeout: 5_000,
      });
      // An ended request is a whole upload to the server, which would commit its first part.
      expect(seen).toEqual([
        { ended: false, rstCode: http2.constants.NGHTTP2_CANCEL },
        { ended: false, rstCode: http2.constants.NGHTTP2_CANCEL },
      ]);
    } finally {
      silent.close();
      server.close();
    }
  });

  describe("readBytes", () => {
    const payload = Buffer.alloc(3 * 1024 * 1024 + 5);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 131 + (i >> 12)) & 0xff;

    beforeAll(async () => {
      await sdk.offload(key("rb", "blob"), payload);
    });

    it("streams the whole payload, and any range of it, byte for byte", async () => {
      const whole = await readAll(sdk.readBytes("rb", "res_blob"));
      expect(whole.bytes.equals(payload)).toBe(true);
      // Data frames come as they arrived, not assembled into one buffer each.
      expect(whole.pieces).toBeGreaterThan(3);
      for (const [offset, length] of [
        [0, 1],
        [1_000_000, 2_500_000],
        [payload.length - 7, 7],
        [payload.length - 7, undefined],
        [payload.length, undefined],
        [5, 0],
      ] as const) {
        const range = length === undefined ? { offset } : { offset, length };
        const got = await readAll(sdk.readBytes("rb", "res_blob", range));
        const want = payload.subarray(offset, length === undefined ? undefined : offset + length);
        expect(got.bytes.equals(want)).toBe(true);
      }
    });

    it("verifies a whole payload against its record, on the caller's thread and off it", async () => {
      const large = Buffer.alloc(6 * 1024 * 1024 + 3, "spill\n");
      await sdk.offload(key("rb", "large"), large);
      for (const [handle, want] of [
        ["res_blob", payload],
        ["res_large", large],
      ] as const) {
        const got = await readAll(sdk.readBytes("rb", handle, {}, { verify: true }));
        expect(got.bytes.equals(want)).toBe(true);
      }
      expect(
        await codeOf(readAll(sdk.readBytes("rb", "res_blob", { offset: 1 }, { verify: true }))),
      ).toBe(Code.InvalidArgument);
      expect(await codeOf(readAll(sdk.readBytes("rb", "res_missing", {}, { verify: true })))).toBe(
        Code.PermissionDenied,
      );
    });

    it("fails a verified read with DATA_LOSS when stored bytes changed, after yielding them", async () => {
      const store = await startTestServer();
      try {
        const client = createSpillwayClient({ baseUrl: store.url });
        for (const [callId, bytes] of [
          ["small", payload.subarray(0, 300_000)],
          ["big", Buffer.concat([payload, payload])],
        ] as const) {
          await client.offload(key("rot", callId), bytes);
          // Bit rot: one byte of the stored blob changes on disk, its size does not.
          const [blob] = await filesOfSize(store.dataDir, bytes.length);
          if (blob === undefined) throw new Error(`no stored blob of ${bytes.length} bytes`);
          const stored = await readFile(blob);
          stored[stored.length >> 1] = (stored[stored.length >> 1] ?? 0) ^ 0x20;
          await writeFile(blob, stored);
          const unchecked = await readAll(client.readBytes("rot", `res_${callId}`));
          expect(unchecked.bytes.equals(stored)).toBe(true);
          let yielded = 0;
          let failure: unknown;
          try {
            for await (const chunk of client.readBytes(
              "rot",
              `res_${callId}`,
              {},
              { verify: true },
            )) {
              yielded += chunk.byteLength;
            }
          } catch (err) {
            failure = err;
          }
          expect(yielded).toBe(bytes.length);
          expect(failure).toBeInstanceOf(ConnectError);
          expect((failure as ConnectError).code).toBe(Code.DataLoss);
          expect((failure as ConnectError).rawMessage).toContain(sha256(bytes));
        }
      } finally {
        await store.stop();
      }
    });

    it("refuses a negative or fractional offset or length before any call", async () => {
      for (const range of [{ offset: -1 }, { length: -5 }, { offset: 1.5 }]) {
        expect(await codeOf(readAll(sdk.readBytes("rb", "res_blob", range)))).toBe(
          Code.InvalidArgument,
        );
      }
    });

    it("reads on past a window the server's max_bytes_window ended", async () => {
      const small = await startTestServer({ caps: { maxBytesWindow: 256 * 1024 } });
      try {
        const calls = { count: 0 };
        const client = createSpillwayClient({
          baseUrl: small.url,
          interceptors: [cutReads([], calls)],
        });
        await client.offload(key("rb", "blob"), payload);
        const got = await readAll(client.readBytes("rb", "res_blob", { offset: 3 }));
        expect(got.bytes.equals(payload.subarray(3))).toBe(true);
        expect(calls.count).toBe(Math.ceil((payload.length - 3) / (256 * 1024)));
      } finally {
        await small.stop();
      }
    });

    it("resumes after a lost replica at the first byte not yet yielded", async () => {
      const calls = { count: 0 };
      // The first attempt loses its stream after the header and two data frames, the second
      // after one more; attempts count afresh once bytes arrive, so three in all suffice.
      const client = createSpillwayClient({
        baseUrl: t.url,
        interceptors: [cutReads([3, 2], calls)],
        retry: { maxAttempts: 2, baseDelayMs: 1 },
      });
      const got = await readAll(client.readBytes("rb", "res_blob"));
      expect(got.bytes.equals(payload)).toBe(true);
      expect(calls.count).toBe(3);
    });

    it("gives up after maxAttempts without progress, and never retries a refusal", async () => {
      const calls = { count: 0 };
      const client = createSpillwayClient({
        baseUrl: t.url,
        interceptors: [cutReads([0, 0, 0, 0], calls)],
        retry: { maxAttempts: 3, baseDelayMs: 1 },
      });
      expect(await codeOf(readAll(client.readBytes("rb", "res_blob")))).toBe(Code.Unavailable);
      expect(calls.count).toBe(3);
      calls.count = 0;
      expect(await codeOf(readAll(client.readBytes("rb", "res_missing")))).toBe(
        Code.PermissionDenied,
      );
      expect(calls.count).toBe(1);
    });
  });

  describe("offload retries", () => {
    const faulty = (plan: Fault[]) =>
      createSpillwayClient({
        baseUrl: t.url,
        interceptors: [faultyOffloads(plan)],
        retry: { baseDelayMs: 1 },
      });

    it("retries a lost response and ends with one committed copy", async () => {
      const plan: Fault[] = ["after"];
      const res = await faulty(plan).offloadResult(key("r1", "lost"), "committed once\n");
      expect(plan).toEqual([]);
      // The first attempt committed; the retry found the identical record.
      expect(res.created).toBe(false);
      expect(res.attachment.stored).not.toBe(Storage.PREVIEW_ONLY);
      const page = await sdk.list("r1");
      expect(page.attachments.map((a) => a.handle)).toEqual(["res_lost"]);
      const w = await sdk.readToolOutput({ runId: "r1", handle: "res_lost" });
      expect(w.rendered).toContain("committed once");
    });

    it("retries a refused call, which then creates the record", async () => {
      const res = await faulty(["before", "before"]).offloadResult(
        key("r2", "refused"),
        { json: { ok: true } },
        { contentType: "application/json" },
      );
      expect(res.created).toBe(true);
      expect((await sdk.stat("r2", "res_refused")).sizeBytes).toBe(11n);
    });

    it("gives up after maxAttempts", async () => {
      const code = await codeOf(
        faulty(["before", "before", "before"]).offload(key("r3", "never"), "x"),
      );
      expect(code).toBe(Code.Unavailable);
      expect(await codeOf(sdk.stat("r3", "res_never"))).toBe(Code.PermissionDenied);
    });

    it("retries a stream that was not read yet", async () => {
      const res = await faulty(["before"]).offloadResult(key("r4", "s"), stream("one\n", "two\n"));
      expect(res.created).toBe(true);
      expect(res.attachment.lineCount).toBe(2n);
    });

    it("does not replay a stream that an attempt already read", async () => {
      const code = await codeOf(
        faulty(["after", "none"]).offload(key("r5", "s"), stream("only once\n")),
      );
      expect(code).toBe(Code.Unavailable);
      // The one attempt committed; nothing retried it.
      const all: string[] = [];
      for await (const a of sdk.listAll("r5")) all.push(a.handle);
      expect(all).toEqual(["res_s"]);
    });
  });
});
