import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type OffloadBatchItem,
  type OffloadBatchResponse,
  OffloadBatchResponseSchema,
  OffloadBatchResultSchema,
  OffloadHeaderSchema,
  OffloadResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { createOffloadBatcher } from "./offload-batcher.js";

const header = (callId: string) =>
  create(OffloadHeaderSchema, { key: { tenant: "dev", runId: "r", callId } });

/** Answers every item as committed, its attachment named after the item's call id. */
function committed(items: OffloadBatchItem[]): OffloadBatchResponse {
  return create(OffloadBatchResponseSchema, {
    results: items.map((item) =>
      create(OffloadBatchResultSchema, {
        result: {
          case: "offloaded" as const,
          value: create(OffloadResponseSchema, {
            attachment: { handle: `res_${item.header?.key?.callId}` },
            created: true,
          }),
        },
      }),
    ),
  });
}

const codeOf = (err: unknown) => ConnectError.from(err).code;

describe("createOffloadBatcher", () => {
  it("splits the offloads of one turn at maxItems and at maxBytes, keeping their order", async () => {
    const batches: string[][] = [];
    const batcher = createOffloadBatcher({
      maxItems: 4,
      maxBytes: 350,
      async sendBatch(items) {
        batches.push(items.map((i) => `${i.header?.key?.callId}:${i.data.byteLength}`));
        return committed(items);
      },
      sendOne: () => Promise.reject(new Error("not expected")),
    });
    const sizes = [100, 100, 100, 100, 300, 10, 10, 10, 10, 10];
    const answers = await Promise.all(
      sizes.map((n, i) => batcher.offload(header(`c${i}`), new Uint8Array(n), {})),
    );
    expect(answers.map((a) => a.attachment?.handle)).toEqual(sizes.map((_, i) => `res_c${i}`));
    expect(batches).toEqual([
      ["c0:100", "c1:100", "c2:100"],
      ["c3:100"],
      ["c4:300", "c5:10", "c6:10", "c7:10"],
      ["c8:10", "c9:10"],
    ]);
  });

  it("sends a payload larger than maxBytes alone rather than never", async () => {
    const batches: number[] = [];
    const batcher = createOffloadBatcher({
      maxBytes: 10,
      async sendBatch(items) {
        batches.push(items.length);
        return committed(items);
      },
      sendOne: () => Promise.reject(new Error("not expected")),
    });
    const answer = await batcher.offload(header("big"), new Uint8Array(50), {});
    expect(answer.attachment?.handle).toBe("res_big");
    expect(batches).toEqual([1]);
  });

  it("fails every item of a batch whose answer has the wrong number of results", async () => {
    const batcher = createOffloadBatcher({
      sendBatch: async (items) => committed(items.slice(1)),
      sendOne: () => Promise.reject(new Error("not expected")),
    });
    const settled = await Promise.allSettled([
      batcher.offload(header("a"), new Uint8Array(1), {}),
      batcher.offload(header("b"), new Uint8Array(1), {}),
    ]);
    for (const s of settled) {
      expect(s.status).toBe("rejected");
      if (s.status === "rejected") {
        expect(codeOf(s.reason)).toBe(Code.Internal);
        expect(String(s.reason)).toContain("1 results for a batch of 2");
      }
    }
  });

  it("settles a cancelled item at once and aborts the batch call once no item waits", async () => {
    let batchSignal: AbortSignal | undefined;
    let answer: (res: OffloadBatchResponse) => void = () => undefined;
    const batcher = createOffloadBatcher({
      sendBatch(items, _timeoutMs, signal) {
        batchSignal = signal;
        return new Promise((resolve) => {
          answer = () => resolve(committed(items));
        });
      },
      sendOne: () => Promise.reject(new Error("not expected")),
    });
    const first = new AbortController();
    const second = new AbortController();
    const a = batcher.offload(header("a"), new Uint8Array(1), { signal: first.signal });
    const b = batcher.offload(header("b"), new Uint8Array(1), { signal: second.signal });
    await new Promise((resolve) => setImmediate(resolve));
    expect(batchSignal?.aborted).toBe(false);
    first.abort();
    await expect(a).rejects.toMatchObject({ code: Code.Canceled });
    expect(batchSignal?.aborted).toBe(false);
    second.abort();
    await expect(b).rejects.toMatchObject({ code: Code.Canceled });
    expect(batchSignal?.aborted).toBe(true);
    answer(create(OffloadBatchResponseSchema));
  });

  it("leaves an answered batch's call alone: its signal is never aborted afterwards", async () => {
    let batchSignal: AbortSignal | undefined;
    const batcher = createOffloadBatcher({
      async sendBatch(items, _timeoutMs, signal) {
        batchSignal = signal;
        return committed(items);
      },
      sendOne: () => Promise.reject(new Error("not expected")),
    });
    const done = await Promise.all(
      ["a", "b"].map((id) => batcher.offload(header(id), new Uint8Array(1), {})),
    );
    expect(done.map((r) => r.attachment?.handle)).toEqual(["res_a", "res_b"]);
    expect(batchSignal?.aborted).toBe(false);
  });

  it("gives the batch the latest deadline of its items, and none when one item has none", async () => {
    const deadlines: (number | undefined)[] = [];
    const batcher = createOffloadBatcher({
      async sendBatch(items, timeoutMs) {
        deadlines.push(timeoutMs);
        return committed(items);
      },
      sendOne: () => Promise.reject(new Error("not expected")),
    });
    await Promise.all([
      batcher.offload(header("a"), new Uint8Array(1), { timeoutMs: 1_000 }),
      batcher.offload(header("b"), new Uint8Array(1), { timeoutMs: 60_000 }),
    ]);
    await Promise.all([
      batcher.offload(header("c"), new Uint8Array(1), { timeoutMs: 1_000 }),
      batcher.offload(header("d"), new Uint8Array(1), {}),
    ]);
    expect(deadlines[0]).toBeGreaterThan(59_000);
    expect(deadlines[0]).toBeLessThanOrEqual(60_000);
    expect(deadlines[1]).toBeUndefined();
  });

  it("passes a batch failure to every item of that batch", async () => {
    const batcher = createOffloadBatcher({
      sendBatch: () => Promise.reject(new ConnectError("store down", Code.Unavailable)),
      sendOne: () => Promise.reject(new Error("not expected")),
    });
    const settled = await Promise.allSettled([
      batcher.offload(header("a"), new Uint8Array(1), {}),
      batcher.offload(header("b"), new Uint8Array(1), {}),
    ]);
    expect(settled.map((s) => (s.status === "rejected" ? codeOf(s.reason) : "ok"))).toEqual([
      Code.Unavailable,
      Code.Unavailable,
    ]);
  });

  it("sends an item answered ABORTED again on its own Offload, once", async () => {
    const alone: string[] = [];
    const batcher = createOffloadBatcher({
      // The reply had room for the first item's answer only.
      async sendBatch(items) {
        const answer = committed(items.slice(0, 1));
        for (const _ of items.slice(1)) {
          answer.results.push(
            create(OffloadBatchResultSchema, {
              result: { case: "error", value: { code: Code.Aborted, message: "send it again" } },
            }),
          );
        }
        return answer;
      },
      async sendOne(h) {
        const callId = h.key?.callId ?? "";
        alone.push(callId);
        if (callId === "c") throw new ConnectError("still busy", Code.Aborted);
        return create(OffloadResponseSchema, { attachment: { handle: `res_${callId}` } });
      },
    });
    const settled = await Promise.allSettled(
      ["a", "b", "c"].map((c) => batcher.offload(header(c), new Uint8Array(1), {})),
    );
    expect(
      settled.map((s) =>
        s.status === "fulfilled" ? s.value.attachment?.handle : codeOf(s.reason),
      ),
    ).toEqual(["res_a", "res_b", Code.Aborted]);
    expect(alone).toEqual(["b", "c"]);
  });

  it("falls back to single offloads with each item's own deadline and signal", async () => {
    const seen: { callId: string | undefined; timeoutMs: number | undefined; signal: boolean }[] =
      [];
    const batcher = createOffloadBatcher({
      sendBatch: () => Promise.reject(new ConnectError("unknown method", Code.Unimplemented)),
      async sendOne(h, _data, timeoutMs, signal) {
        seen.push({ callId: h.key?.callId, timeoutMs, signal: signal !== undefined });
        return create(OffloadResponseSchema, { attachment: { handle: `res_${h.key?.callId}` } });
      },
    });
    const controller = new AbortController();
    await Promise.all([
      batcher.offload(header("a"), new Uint8Array(1), { timeoutMs: 5_000 }),
      batcher.offload(header("b"), new Uint8Array(1), { signal: controller.signal }),
    ]);
    expect(seen.map((s) => s.callId)).toEqual(["a", "b"]);
    expect(seen[0]?.timeoutMs).toBeGreaterThan(4_000);
    expect(seen[0]?.signal).toBe(false);
    expect(seen[1]).toEqual({ callId: "b", timeoutMs: undefined, signal: true });
  });
});
