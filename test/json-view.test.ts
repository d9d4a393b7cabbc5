import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { JsonKind } from "@spillway/proto/spillway/v1/types_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSweeper } from "../server/src/sweeper.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/**
 * The JSON view end to end: offload indexes it in the same pass and stores the checkpoints
 * beside the blob; any window, at any depth, renders exactly the lines of the canonical
 * pretty-printing, resumed from a checkpoint.
 */
describe("the JSON view of stored outputs", () => {
  let t: TestServer;
  const value = {
    kind: "report",
    items: Array.from({ length: 1500 }, (_, i) => ({
      id: i,
      name: `item ${i} ☃`,
      tags: i % 3 === 0 ? [] : ["a", `t${i}`],
      nested: { ok: i % 2 === 0, deeper: [[i], { at: i }] },
    })),
    empty: {},
  };
  const pretty = JSON.stringify(value, null, 2).split("\n");
  const records = Array.from({ length: 2500 }, (_, i) => ({ seq: i, v: [i, { x: null }] }));

  const jsonWindow = (handle: string, offset: number, limit: number, fromEnd = false) =>
    t.sdk().readToolOutput({
      runId: "r",
      handle,
      window: { case: "json", value: { offset: BigInt(offset), limit, fromEnd } },
    });
  const linesOf = (w: Awaited<ReturnType<typeof jsonWindow>>) =>
    w.frames.flatMap((f) =>
      f.frame.case === "content" && f.frame.value.body.case === "lines"
        ? f.frame.value.body.value.lines
        : [],
    );

  beforeAll(async () => {
    // A short checkpoint interval puts many checkpoints in a small document.
    t = await startTestServer({ limits: { jsonViewStride: 64 } });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("indexes a document while offloading it and stores the checkpoints beside the blob", async () => {
    const att = await t
      .sdk()
      .offload({ tenant: "dev", runId: "r", callId: "doc" }, JSON.stringify(value), {
        contentType: "application/json",
      });
    expect(att.jsonKind).toBe(JsonKind.DOCUMENT);
    expect(Number(att.jsonViewLines)).toBe(pretty.length);
    const dir = join(t.dataDir, "store", "t", "dev", "r", "r", "b", "doc");
    expect(readdirSync(dir).filter((n) => n.endsWith(".jidx"))).toHaveLength(1);
  });

  it("renders every window exactly as the pretty-printing, from any line", async () => {
    for (const offset of [0, 1, 63, 64, 65, 1000, 12_345, pretty.length - 7]) {
      const w = await jsonWindow("res_doc", offset, 7);
      const lines = linesOf(w);
      expect(
        lines.map((l) => l.text),
        `offset ${offset}`,
      ).toEqual(pretty.slice(offset, offset + 7));
      expect(lines.map((l) => Number(l.number))).toEqual(
        pretty.slice(offset, offset + 7).map((_, k) => offset + k + 1),
      );
      expect(w.header?.viewLines).toBe(BigInt(pretty.length));
    }
    const tail = await jsonWindow("res_doc", 0, 3, true);
    expect(linesOf(tail).map((l) => l.text)).toEqual(pretty.slice(-3));
    expect(tail.trailer?.eof).toBe(true);
  });

  it("gives each line the source offset of its first token", async () => {
    const source = Buffer.from(JSON.stringify(value));
    const w = await jsonWindow("res_doc", 5000, 20);
    // The loop below checks nothing of an empty window.
    expect(linesOf(w)).toHaveLength(20);
    for (const line of linesOf(w)) {
      const text = line.text.trim();
      const first = text.startsWith('"') ? text.slice(0, text.indexOf('"', 1) + 1) : text[0];
      const at = Number(line.byteOffset);
      expect(source.subarray(at, at + Buffer.byteLength(first ?? "")).toString()).toBe(first);
    }
  });

  it("pages JSON Lines by record, also deep in a stored blob", async () => {
    const att = await t
      .sdk()
      .offload(
        { tenant: "dev", runId: "r", callId: "jl" },
        records.map((r) => JSON.stringify(r, null, 0).replace(/,/g, ", ")).join("\n"),
      );
    expect(att.jsonKind).toBe(JsonKind.LINES);
    expect(Number(att.jsonViewLines)).toBe(records.length);
    for (const offset of [0, 64, 1999, 2497]) {
      const lines = linesOf(await jsonWindow("res_jl", offset, 3));
      expect(lines.map((l) => l.text)).toEqual(
        records.slice(offset, offset + 3).map((r) => JSON.stringify(r)),
      );
    }
  });

  it("refuses text with FAILED_PRECONDITION and reports no JSON kind", async () => {
    const att = await t
      .sdk()
      .offload({ tenant: "dev", runId: "r", callId: "txt" }, "x\n".repeat(20_000));
    expect(att.jsonKind).toBe(JsonKind.UNSPECIFIED);
    await expect(jsonWindow("res_txt", 0, 5)).rejects.toThrow(
      /neither a JSON document nor JSON Lines/,
    );
  });
});

describe("the JSON view index and the sweeper", () => {
  it("keeps a live output's index and removes an expired run's with its blobs", async () => {
    let clock = Date.now();
    const t = await startTestServer({ now: () => clock, limits: { jsonViewStride: 8 } });
    try {
      const doc = JSON.stringify(Array.from({ length: 3000 }, (_, i) => ({ i })));
      const sdk = t.sdk();
      await sdk.offload({ tenant: "dev", runId: "r", callId: "live" }, doc);
      await sdk.offload({ tenant: "dev", runId: "temp", callId: "gone" }, doc);
      await sdk.setRunTtl("temp", 60);
      const dir = (run: string, call: string) =>
        join(t.dataDir, "store", "t", "dev", "r", run, "b", call);
      expect(readdirSync(dir("r", "live")).filter((n) => n.endsWith(".jidx"))).toHaveLength(1);
      expect(readdirSync(dir("temp", "gone")).filter((n) => n.endsWith(".jidx"))).toHaveLength(1);
      clock += 3_600_000;
      const report = await createSweeper(t.server.core, {
        intervalMs: 60_000,
        orphanAgeMs: 30_000,
      }).sweepOnce();
      expect(report).toMatchObject({ expiredRuns: 1, orphanBlobs: 0 });
      expect(readdirSync(dir("r", "live")).filter((n) => n.endsWith(".jidx"))).toHaveLength(1);
      expect(existsSync(dir("temp", "gone"))).toBe(false);
      const w = await sdk.readToolOutput({
        runId: "r",
        handle: "res_live",
        window: { case: "json", value: { offset: 5000n, limit: 2 } },
      });
      expect(w.rendered).toContain(`  5001\t    "i": 1666\n`);
    } finally {
      await t.stop();
    }
  });
});
