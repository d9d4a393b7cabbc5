import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { bytesBody } from "./backends/body.js";
import { createMemoryBackend } from "./backends/memory.js";
import { mergeOutcomeKey } from "./keys.js";
import { createMergeOutcomes } from "./merge-outcomes.js";
import { isOwnOutput } from "./merge-run.js";
import type { StoredRecord } from "./record.js";

const record = (over: Partial<StoredRecord>): StoredRecord => ({
  v: 1,
  handle: "res_a",
  tenant: "t",
  runId: "child",
  callId: "a",
  name: "a",
  contentType: "text/plain",
  sizeBytes: 2,
  observedBytes: 2,
  truncated: false,
  stored: "inline",
  sha256: "00",
  binary: false,
  lineCount: 1,
  preview: { head: "", tail: "", shape: "", omittedBytes: 0, text: "" },
  createdMs: 1,
  ...over,
});

describe("merge outcomes", () => {
  it("are decided once: the first outcome holds for every later executor", async () => {
    const outcomes = createMergeOutcomes(createMemoryBackend());
    expect(await outcomes.read("t", "p", "m1")).toBeUndefined();
    expect(await outcomes.decide("t", "p", "m1", "aborted")).toBe("aborted");
    expect(await outcomes.decide("t", "p", "m1", "committed")).toBe("aborted");
    expect(await outcomes.decide("t", "p", "m2", "committed")).toBe("committed");
    expect(await outcomes.decide("t", "p", "m2", "aborted")).toBe("committed");
    expect(await outcomes.read("t", "p", "m2")).toBe("committed");
  });

  it("show a merged record only once its merge committed; unmarked records always", async () => {
    const outcomes = createMergeOutcomes(createMemoryBackend());
    const merged = record({ merge: { id: "m1", into: "p" } });
    expect(await outcomes.isVisible(record({}))).toBe(true);
    expect(await outcomes.isVisible(merged)).toBe(false);
    await outcomes.decide("t", "p", "m1", "committed");
    expect(await outcomes.isVisible(merged)).toBe(true);
    // Another run's or tenant's outcome of the same id does not count.
    expect(await outcomes.isVisible({ ...merged, merge: { id: "m1", into: "q" } })).toBe(false);
    expect(await outcomes.isVisible({ ...merged, tenant: "u" })).toBe(false);
  });

  it("refuses a corrupt outcome or merge mark as DATA_LOSS", async () => {
    const backend = createMemoryBackend();
    await backend.put(mergeOutcomeKey("t", "p", "bad"), bytesBody(Buffer.from("{nope")));
    const outcomes = createMergeOutcomes(backend);
    const code = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (err: unknown) => ConnectError.from(err).code,
      );
    expect(await code(outcomes.read("t", "p", "bad"))).toBe(Code.DataLoss);
    const mark = { id: 7, into: "p" } as unknown as { id: string; into: string };
    expect(await code(outcomes.isVisible(record({ merge: mark })))).toBe(Code.DataLoss);
  });
});

describe("merge outcomes read concurrently", () => {
  it("read a merge's outcome once for every record of it a listing shows at once", async () => {
    const memory = createMemoryBackend();
    let gets = 0;
    const outcomes = createMergeOutcomes({
      ...memory,
      get: (key, opts) => {
        if (key.includes("/m/o/")) gets++;
        return memory.get(key, opts);
      },
    });
    await outcomes.decide("t", "p", "m1", "committed");
    // A restarted server lists a page of 500 records one merge brought in: one read, not 500.
    const fresh = createMergeOutcomes({
      ...memory,
      get: (key, opts) => {
        if (key.includes("/m/o/")) gets++;
        return memory.get(key, opts);
      },
    });
    const shown = await Promise.all(
      Array.from({ length: 500 }, (_, i) =>
        fresh.isVisible(record({ handle: `res_${i}`, merge: { id: "m1", into: "p" } })),
      ),
    );
    expect(shown.every((v) => v)).toBe(true);
    expect(gets).toBe(1);
    // A caller that gives up is released at once, and does not fail the others' shared read.
    const again = createMergeOutcomes(memory);
    const gone = new AbortController();
    gone.abort();
    const merged = record({ merge: { id: "m1", into: "p" } });
    const [cancelled, kept] = await Promise.allSettled([
      again.isVisible(merged, gone.signal),
      again.isVisible(merged),
    ]);
    expect(cancelled.status).toBe("rejected");
    expect(kept).toEqual({ status: "fulfilled", value: true });
  });
});

describe("isOwnOutput", () => {
  it("is what the child offloaded or merged in itself, never what a fork copied", () => {
    expect(isOwnOutput(record({ runId: "child" }), "child")).toBe(true);
    expect(isOwnOutput(record({ runId: "parent" }), "child")).toBe(false);
    expect(
      isOwnOutput(record({ runId: "grandchild", merge: { id: "m", into: "child" } }), "child"),
    ).toBe(true);
    // A record merged into the parent before the fork: the fork's copy dropped the mark, and a
    // mark naming another run is that run's.
    expect(
      isOwnOutput(record({ runId: "child", merge: { id: "m", into: "parent" } }), "child"),
    ).toBe(false);
  });
});
