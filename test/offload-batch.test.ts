import { createHash, randomBytes } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import type {
  OffloadBatchItemSchema,
  OffloadBatchResponse,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { Storage } from "@spillway/proto/spillway/v1/types_pb.js";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import { codeOf, failureOf } from "./support/code-of.js";
import { serviceBackends, startTestServer, type TestServer } from "./support/test-server.js";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const key = (callId: string, runId = "run", tenant = "dev") => ({ tenant, runId, callId });
type Item = MessageInitShape<typeof OffloadBatchItemSchema>;

/** outcomes names each result of a batch: `ok`, `existing`, or the failed item's code name. */
function outcomes(res: OffloadBatchResponse): string[] {
  return res.results.map(({ result }) => {
    if (result.case === "offloaded") return result.value.created ? "ok" : "existing";
    if (result.case === "error") return Code[result.value.code] ?? String(result.value.code);
    return "empty";
  });
}

async function handlesOf(t: TestServer, runId: string): Promise<string[]> {
  return (await t.sdk().list(runId)).attachments.map((a) => a.handle);
}

describe.each(serviceBackends)("OffloadBatch (%s)", (backendKind) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      backend: backendKind,
      limits: { maxChunkBytes: 1024 * 1024, maxBlobBytes: 64 << 20 },
    });
  });
  afterAll(() => t.stop());

  it("commits each item as its own Offload would and answers them in request order", async () => {
    await t.sdk().offload(key("dup"), "first\n");
    const large = randomBytes(40_000);
    const items: Item[] = [
      { header: { key: key("a"), name: "tool" }, data: Buffer.from("alpha\nbeta\n") },
      { header: { key: key("large") }, data: large },
      { header: { key: key("dup") }, data: Buffer.from("first\n") },
      { header: { key: key("dup") }, data: Buffer.from("changed\n") },
      { header: { key: key("theirs", "run", "other") }, data: Buffer.from("x") },
      { data: Buffer.from("no header") },
      { header: { key: key("badsha"), expectedSha256: "0".repeat(64) }, data: Buffer.from("y") },
      { header: { key: key("badslot"), slot: "bogus" }, data: Buffer.from("z") },
      { header: { key: key("empty") }, data: new Uint8Array(0) },
      { header: { key: key("up"), slot: "file:../../etc/passwd" }, data: Buffer.from("t") },
      { header: { key: key("c", "../other") }, data: Buffer.from("t") },
    ];
    const res = await t.raw().offloadBatch({ items });
    expect(outcomes(res)).toEqual([
      "ok",
      "ok",
      "existing",
      "AlreadyExists",
      "PermissionDenied",
      "InvalidArgument",
      "DataLoss",
      "InvalidArgument",
      "ok",
      "InvalidArgument",
      "InvalidArgument",
    ]);
    const [a, big] = res.results.map((r) =>
      r.result.case === "offloaded" ? r.result.value.attachment : undefined,
    );
    expect(a?.stored).toBe(Storage.INLINE);
    expect(a?.lineCount).toBe(2n);
    expect(a?.preview?.text).toContain("alpha");
    expect(big?.stored).toBe(Storage.BLOB);
    expect(big?.sha256).toBe(sha(large));
    const back = [];
    for await (const chunk of t.sdk().readBytes("run", "res_large")) back.push(chunk);
    expect(sha(Buffer.concat(back))).toBe(sha(large));
    // The refused items left nothing; the committed original is untouched.
    expect(await handlesOf(t, "run")).toEqual(["res_a", "res_dup", "res_empty", "res_large"]);
    expect((await t.sdk().readToolOutput({ runId: "run", handle: "res_dup" })).rendered).toContain(
      "first",
    );
  });

  it("commits the first of two items with one key, in request order, every time", async () => {
    // Committed at the same moment, the two raced for the key: each won some of 30 trials.
    const trials = 30;
    const answers = await Promise.all(
      Array.from({ length: trials }, (_, trial) =>
        t.raw().offloadBatch({
          items: [
            { header: { key: key(`same${trial}`, "dups") }, data: Buffer.from("first\n") },
            { header: { key: key(`same${trial}`, "dups") }, data: Buffer.from("second\n") },
            { header: { key: key(`twin${trial}`, "dups") }, data: Buffer.from("twin\n") },
            { header: { key: key(`twin${trial}`, "dups") }, data: Buffer.from("twin\n") },
          ],
        }),
      ),
    );
    for (const res of answers) {
      expect(outcomes(res)).toEqual(["ok", "AlreadyExists", "ok", "existing"]);
    }
    for (let trial = 0; trial < trials; trial++) {
      const read = await t.sdk().readToolOutput({ runId: "dups", handle: `res_same${trial}` });
      expect(read.rendered).toContain("first");
    }
  });

  it("refuses an empty batch and one of more than 1000 items as a whole", async () => {
    expect(await codeOf(t.raw().offloadBatch({ items: [] }))).toBe(Code.InvalidArgument);
    const items = Array.from({ length: 1001 }, (_, i) => ({
      header: { key: key(`c${i}`, "many") },
      data: Buffer.from("x"),
    }));
    const err = await failureOf(t.raw().offloadBatch({ items }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toContain("1 to 1000 items, got 1001");
    expect(await handlesOf(t, "many")).toEqual([]);
    const most = await t.raw().offloadBatch({ items: items.slice(0, 1000) });
    expect(new Set(outcomes(most))).toEqual(new Set(["ok"]));
  });

  it("refuses an item over max_chunk_bytes on its own and a request over the largest message as a whole", async () => {
    const res = await t.raw().offloadBatch({
      items: [
        { header: { key: key("over", "sizes") }, data: new Uint8Array(1024 * 1024 + 1) },
        { header: { key: key("fits", "sizes") }, data: new Uint8Array(40_000) },
      ],
    });
    expect(outcomes(res)).toEqual(["ResourceExhausted", "ok"]);
    const whole = await failureOf(
      t.raw().offloadBatch({
        items: [
          { header: { key: key("x", "sizes") }, data: new Uint8Array(700_000) },
          { header: { key: key("y", "sizes") }, data: new Uint8Array(700_000) },
        ],
      }),
    );
    expect(whole.code).toBe(Code.ResourceExhausted);
    expect(await handlesOf(t, "sizes")).toEqual(["res_fits"]);
  });
});

describe("OffloadBatch under a run limit", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ limits: { ...defaultTestLimits, maxRunBytes: 1000 } });
  });
  afterAll(() => t.stop());

  it("measures each item against what the items before it committed", async () => {
    const item = (callId: string) => ({
      header: { key: key(callId, "limited") },
      data: new Uint8Array(400),
    });
    const res = await t.raw().offloadBatch({ items: [item("a"), item("b"), item("c")] });
    expect(outcomes(res)).toEqual(["ok", "ok", "ResourceExhausted"]);
    const refused = res.results[2]?.result;
    expect(refused?.case === "error" && refused.value.message).toContain("max_run_bytes 1000");
    expect(await handlesOf(t, "limited")).toEqual(["res_a", "res_b"]);
  });
});

describe("OffloadBatch concurrency", () => {
  let t: TestServer;
  const writes = { now: 0, most: 0 };
  const runStateReads: string[] = [];
  /** Records looked up (read by key) and keys written, in order. */
  const recordReads: string[] = [];
  const keysWritten: string[] = [];
  /** Counts `records` records as being written while write runs, made slow enough to overlap. */
  const slowWrite = async <T>(records: number, write: () => Promise<T>): Promise<T> => {
    writes.now += records;
    writes.most = Math.max(writes.most, writes.now);
    try {
      // Long enough that every item the server starts at once overlaps.
      await new Promise((resolve) => setTimeout(resolve, 5));
      return await write();
    } finally {
      writes.now -= records;
    }
  };
  beforeAll(async () => {
    const counting = (base: Backend): Backend => ({
      ...base,
      head(k, opts) {
        if (k.endsWith("/deleted")) runStateReads.push(k);
        return base.head(k, opts);
      },
      get(k, opts) {
        if (k.endsWith("/ttl")) runStateReads.push(k);
        if (k.includes("/h/")) recordReads.push(k);
        return base.get(k, opts);
      },
      put: (k, body, opts) => {
        keysWritten.push(k);
        return slowWrite(1, () => base.put(k, body, opts));
      },
      // Records committed together are one putMany, which writes each of them.
      putMany: (keys, body, opts) => {
        keysWritten.push(...keys);
        return slowWrite(
          keys.length,
          () => base.putMany?.(keys, body, opts) ?? Promise.resolve([]),
        );
      },
    });
    t = await startTestServer({ wrapBackend: counting });
  });
  afterAll(() => t.stop());

  it("commits at most 32 items of a batch at once", async () => {
    const items = Array.from({ length: 200 }, (_, i) => ({
      header: { key: key(`c${i}`, "wide") },
      data: Buffer.from(`${i}\n`),
    }));
    const res = await t.raw().offloadBatch({ items });
    expect(new Set(outcomes(res))).toEqual(new Set(["ok"]));
    // Each item has at most one record being written (on its own, or in a pack with others),
    // and they do overlap.
    expect(writes.most).toBeLessThanOrEqual(32);
    expect(writes.most).toBeGreaterThanOrEqual(16);
  });

  it("commits a first batch of small items without looking each one up, and writes nothing for its retry", async () => {
    const items = Array.from({ length: 10 }, (_, i) => ({
      header: { key: key(`c${i}`, "retried") },
      data: Buffer.from(`line ${i}\n`),
    }));
    recordReads.length = 0;
    keysWritten.length = 0;
    expect(new Set(outcomes(await t.raw().offloadBatch({ items })))).toEqual(new Set(["ok"]));
    // One look at the first item's handle decides; the rest commit at once.
    expect(recordReads).toHaveLength(1);
    expect(keysWritten.filter((k) => k.includes("/retried/"))).toHaveLength(10);

    recordReads.length = 0;
    keysWritten.length = 0;
    const again = await t.raw().offloadBatch({ items });
    expect(new Set(outcomes(again))).toEqual(new Set(["existing"]));
    // The first item is committed, so every item is looked up and nothing is written again.
    expect(keysWritten).toEqual([]);
    expect(recordReads.length).toBeGreaterThanOrEqual(10);
  });

  it("reads each run's state once per batch, not once per item", async () => {
    runStateReads.length = 0;
    const items = ["a", "b"].flatMap((run) =>
      Array.from({ length: 10 }, (_, i) => ({
        header: { key: key(`c${i}`, `state-${run}`) },
        data: Buffer.from(`${run}${i}\n`),
      })),
    );
    const res = await t.raw().offloadBatch({ items });
    expect(new Set(outcomes(res))).toEqual(new Set(["ok"]));
    expect(runStateReads.map((k) => k.replace(/^.*\/r\//, "")).sort()).toEqual([
      "state-a/deleted",
      "state-a/ttl",
      "state-b/deleted",
      "state-b/ttl",
    ]);
  });
});

const defaultTestLimits = {
  maxBlobBytes: 8 * 1024 * 1024 * 1024,
  maxChunkBytes: 4 * 1024 * 1024,
  inlineBytes: 16 * 1024,
  indexStride: 1024,
  idleStreamMs: 60_000,
};

/** countCalls counts the SDK's calls by method, and the items of each OffloadBatch. */
function countCalls(): { interceptor: Interceptor; calls: Map<string, number>; sizes: number[] } {
  const calls = new Map<string, number>();
  const sizes: number[] = [];
  return {
    calls,
    sizes,
    interceptor: (next) => (req) => {
      calls.set(req.method.name, (calls.get(req.method.name) ?? 0) + 1);
      if (!req.stream && req.method.name === "OffloadBatch") {
        sizes.push((req.message as unknown as { items: unknown[] }).items.length);
      }
      return next(req);
    },
  };
}

describe("the SDK's offload batching", () => {
  let t: TestServer;
  let release: () => void = () => undefined;
  let gate: Promise<void> = Promise.resolve();
  beforeAll(async () => {
    // Puts under the run "held" wait for the test to let them through.
    const holding = (base: Backend): Backend => ({
      ...base,
      async put(k, body, opts) {
        if (k.includes("/held/")) await gate;
        return base.put(k, body, opts);
      },
    });
    t = await startTestServer({ wrapBackend: holding });
  });
  afterAll(() => t.stop());
  const client = (interceptor: Interceptor) =>
    createSpillwayClient({ baseUrl: t.url, interceptors: [interceptor] });

  it("sends the small offloads started together as one OffloadBatch and a large one on its own", async () => {
    const counter = countCalls();
    const sdk = client(counter.interceptor);
    const payloads = Array.from({ length: 40 }, (_, i) => randomBytes(100 + i * 50));
    const large = randomBytes(200_000);
    const [bigOne, ...small] = await Promise.all([
      sdk.offload(key("large", "together"), large),
      ...payloads.map((p, i) => sdk.offload(key(`s${i}`, "together"), p)),
    ]);
    expect(bigOne?.sha256).toBe(sha(large));
    expect(small.map((a) => a.sha256)).toEqual(payloads.map(sha));
    expect(Object.fromEntries(counter.calls)).toEqual({ OffloadBatch: 1, Offload: 1 });
    expect(counter.sizes).toEqual([40]);
    // Later offloads form batches of their own.
    await sdk.offload(key("later", "together"), "later\n");
    expect(counter.sizes).toEqual([40, 1]);
  });

  it("splits offloads started together into batches of at most 256", async () => {
    const counter = countCalls();
    const sdk = client(counter.interceptor);
    const all = await Promise.all(
      Array.from({ length: 300 }, (_, i) => sdk.offload(key(`c${i}`, "split"), `${i}\n`)),
    );
    expect(all).toHaveLength(300);
    expect(counter.sizes).toEqual([256, 44]);
    expect((await t.sdk().stat("split", "res_c299")).sizeBytes).toBe(4n);
  });

  it("settles each offload with its own item's outcome", async () => {
    const counter = countCalls();
    const sdk = client(counter.interceptor);
    const [ok, theirs, badSlot] = await Promise.allSettled([
      sdk.offload(key("ok", "mixed"), "fine\n"),
      sdk.offload(key("x", "mixed", "other"), "not mine\n"),
      sdk.offload(key("y", "mixed"), "bad slot\n", { slot: "bogus" }),
    ]);
    expect(ok.status === "fulfilled" && ok.value.handle).toBe("res_ok");
    const denied = theirs.status === "rejected" ? ConnectError.from(theirs.reason) : undefined;
    expect(denied?.code).toBe(Code.PermissionDenied);
    expect(denied?.rawMessage).toContain(`"other" is not the caller's tenant "dev"`);
    const invalid = badSlot.status === "rejected" ? ConnectError.from(badSlot.reason) : undefined;
    expect(invalid?.code).toBe(Code.InvalidArgument);
    expect(counter.sizes).toEqual([3]);
  });

  it("leaves out an offload cancelled before its batch was sent", async () => {
    const counter = countCalls();
    const sdk = client(counter.interceptor);
    const controller = new AbortController();
    const cancelled = sdk.offload(
      key("gone", "cancel"),
      "gone\n",
      {},
      { signal: controller.signal },
    );
    const kept = sdk.offload(key("kept", "cancel"), "kept\n");
    controller.abort();
    expect(await codeOf(cancelled)).toBe(Code.Canceled);
    expect((await kept).handle).toBe("res_kept");
    expect(counter.sizes).toEqual([1]);
    expect(await handlesOf(t, "cancel")).toEqual(["res_kept"]);
    const already = new AbortController();
    already.abort();
    expect(
      await codeOf(sdk.offload(key("never", "cancel"), "x", {}, { signal: already.signal })),
    ).toBe(Code.Canceled);
    expect(counter.sizes).toEqual([1]);
  });

  it("gives up on an offload at its deadline, which may still commit whole", async () => {
    gate = new Promise((resolve) => {
      release = resolve;
    });
    const sdk = t.sdk();
    const bytes = randomBytes(30_000);
    const slow = sdk.offload(key("slow", "held"), bytes, {}, { timeoutMs: 100 });
    expect(await codeOf(slow)).toBe(Code.DeadlineExceeded);
    release();
    // The batch went on without its caller; a retry of the same bytes finds it committed whole
    // (or commits it), never a part.
    const again = await sdk.offloadResult(key("slow", "held"), bytes);
    expect(again.attachment.sha256).toBe(sha(bytes));
    expect(again.attachment.sizeBytes).toBe(30_000n);
  });

  it("sends each offload on its own Offload stream once a server answers OffloadBatch UNIMPLEMENTED", async () => {
    const counter = countCalls();
    let refused = 0;
    // A replica that predates OffloadBatch, at the wire boundary.
    const olderReplica: Interceptor = (next) => (req) => {
      if (req.method.name === "OffloadBatch") {
        refused++;
        throw new ConnectError("unknown method", Code.Unimplemented);
      }
      return next(req);
    };
    const sdk = createSpillwayClient({
      baseUrl: t.url,
      interceptors: [counter.interceptor, olderReplica],
    });
    const first = await Promise.all([
      sdk.offload(key("a", "older"), "a\n"),
      sdk.offload(key("b", "older"), "b\n"),
    ]);
    expect(first.map((a) => a.handle)).toEqual(["res_a", "res_b"]);
    const later = await sdk.offload(key("c", "older"), "c\n");
    expect(later.handle).toBe("res_c");
    expect(refused).toBe(1);
    expect(counter.calls.get("Offload")).toBe(3);
    expect(await handlesOf(t, "older")).toEqual(["res_a", "res_b", "res_c"]);
  });
});

describe("OffloadBatch item failures", () => {
  let t: TestServer;
  const lines: Record<string, unknown>[] = [];
  beforeAll(async () => {
    // The store fails with an error of its own (not a status) for one run's puts.
    const faulty = (base: Backend): Backend => ({
      ...base,
      async put(k, body, opts) {
        if (k.includes("/broken/")) throw new Error("disk on fire");
        return base.put(k, body, opts);
      },
      async putMany(keys, body, opts) {
        if (keys.some((k) => k.includes("/broken/"))) throw new Error("disk on fire");
        return base.putMany?.(keys, body, opts) ?? [];
      },
    });
    const logger = pino(
      { level: "debug" },
      { write: (line: string) => lines.push(JSON.parse(line)) },
    );
    t = await startTestServer({ wrapBackend: faulty, logger });
  });
  afterAll(() => t.stop());

  it("answers a server fault as INTERNAL without its text and logs it with the item's index", async () => {
    const res = await t.raw().offloadBatch({
      items: [
        { header: { key: key("fine", "ok") }, data: Buffer.from("fine\n") },
        { header: { key: key("lost", "broken") }, data: Buffer.from("lost\n") },
        { header: { key: key("theirs", "ok", "other") }, data: Buffer.from("x") },
      ],
    });
    expect(outcomes(res)).toEqual(["ok", "Internal", "PermissionDenied"]);
    const fault = res.results[1]?.result;
    expect(fault?.case === "error" && fault.value.message).toBe("internal error");
    const errors = lines.filter((l) => l.level === 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({
      msg: "batch item failed",
      procedure: "OffloadBatch",
      item: 1,
      code: "Internal",
    });
    expect(JSON.stringify(errors[0]?.err)).toContain("disk on fire");
    expect(lines.filter((l) => l.msg === "call" && l.procedure === "OffloadBatch")).toHaveLength(1);
  });
});
