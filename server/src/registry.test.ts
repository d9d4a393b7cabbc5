import { randomBytes } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { codeOf } from "../../test/support/code-of.js";
import { scratchDir } from "../../test/support/scratch-dir.js";
import type { Backend } from "./backends/backend.js";
import { bytesBody, readAllBytes } from "./backends/body.js";
import { createFilesystemBackend } from "./backends/filesystem.js";
import { createMemoryBackend } from "./backends/memory.js";
import { recordKey } from "./keys.js";
import { encodeRecord, type NewRecord, toBase64 } from "./record.js";
import { encodeRecordPack, packHeadBytes } from "./record-pack.js";
import { createRegistry } from "./registry.js";

/** A record of about `inlineBytes` of payload (4 KiB ones make a pack outgrow its first read). */
function record(runId: string, callId: string, inlineBytes = 4096): NewRecord {
  return {
    v: 1,
    handle: `res_${callId}`,
    tenant: "dev",
    runId,
    callId,
    name: callId,
    contentType: "text/plain",
    sizeBytes: inlineBytes,
    observedBytes: inlineBytes,
    truncated: false,
    stored: "inline",
    sha256: "0".repeat(64),
    binary: true,
    lineCount: 0,
    preview: { head: "", tail: "", shape: "", omittedBytes: 0, text: `[res_${callId}]` },
    createdMs: 1_796_094_295_331,
    inline: toBase64(randomBytes(inlineBytes)),
  };
}

/** commitAll commits records in one turn of the event loop, as an OffloadBatch's items do. */
function commitAll(
  registry: ReturnType<typeof createRegistry>,
  records: readonly NewRecord[],
  signals: readonly (AbortSignal | undefined)[] = [],
) {
  return Promise.allSettled(records.map((r, i) => registry.commit(r, r.runId, signals[i])));
}

const backends: [string, (dir: string) => Backend][] = [
  ["memory", () => createMemoryBackend()],
  ["filesystem", (dir) => createFilesystemBackend({ root: dir })],
];

for (const [kind, make] of backends) {
  describe(`registry on ${kind}: records committed together`, () => {
    const dir = scratchDir(`spillway-registry-${kind}-`);

    it("are each read back whole, whatever their place in the pack, across runs", async () => {
      const registry = createRegistry(make(join(dir, "a")));
      const records = Array.from({ length: 40 }, (_, i) => record(i % 2 ? "odd" : "even", `c${i}`));
      const results = await commitAll(registry, records);
      expect(results.map((r) => r.status === "fulfilled" && r.value.created)).toEqual(
        records.map(() => true),
      );
      for (const r of records) {
        expect(await registry.get("dev", r.runId, r.handle)).toEqual(r);
      }
      const page = await registry.list("dev", "odd", { limit: 100 });
      const odd = records.filter((r) => r.runId === "odd");
      expect(page.records).toEqual(odd.sort((a, b) => (a.handle < b.handle ? -1 : 1)));
    });

    it("read as they are now: a removed record is gone, one committed again is the new one", async () => {
      const registry = createRegistry(make(join(dir, "again")));
      const first = record("run", "again");
      await registry.commit(first, "run");
      expect(await registry.get("dev", "run", first.handle)).toEqual(first);
      await registry.remove("dev", "run", first.handle);
      expect(await registry.get("dev", "run", first.handle)).toBeUndefined();
      const second = record("run", "again");
      await registry.commit(second, "run");
      const now = await registry.get("dev", "run", first.handle);
      expect(now).toEqual(second);
      expect(now).not.toEqual(first);
    });

    it("answer a taken handle with the record already there, and commit the rest", async () => {
      const registry = createRegistry(make(join(dir, "b")));
      const earlier = record("run", "taken");
      await registry.commit(earlier, "run");
      const later = ["x", "taken", "y"].map((c) => record("run", c));
      const results = await commitAll(registry, later);
      expect(
        results.map((r) => (r.status === "fulfilled" ? [r.value.created, r.value.record] : r)),
      ).toEqual([
        [true, later[0]],
        [false, earlier],
        [true, later[2]],
      ]);
      expect(await registry.get("dev", "run", "res_taken")).toEqual(earlier);
    });

    it("let one of two records for the same handle win, and read back the winner", async () => {
      const base = make(join(dir, "h"));
      // A store may take a pack's names in any order: this one takes them last to first.
      const registry = createRegistry({
        ...base,
        async putMany(keys, body, opts) {
          const results = await base.putMany?.([...keys].reverse(), body, opts);
          return [...(results ?? [])].reverse();
        },
      });
      const [a, b] = [record("run", "same"), record("run", "same")];
      if (a === undefined || b === undefined) throw new Error("no records");
      const results = await commitAll(registry, [record("run", "x"), a, b, record("run", "y")]);
      const same = results.slice(1, 3).map((r) => (r.status === "fulfilled" ? r.value : undefined));
      expect(same.map((r) => r?.created).sort()).toEqual([false, true]);
      const winner = same.find((r) => r?.created)?.record;
      expect(winner === a || winner === b).toBe(true);
      expect(same.find((r) => r?.created === false)?.record).toEqual(winner);
      expect(await registry.get("dev", "run", "res_same")).toEqual(winner);
    });

    it("leave an aborted record out and keep every other", async () => {
      const registry = createRegistry(make(join(dir, "c")));
      const records = ["p", "q", "r"].map((c) => record("run", c));
      const results = await commitAll(registry, records, [
        AbortSignal.abort(),
        undefined,
        undefined,
      ]);
      expect(
        results[0]?.status === "rejected" && (await codeOf(Promise.reject(results[0].reason))),
      ).toBe(Code.Canceled);
      expect(await registry.get("dev", "run", "res_p")).toBeUndefined();
      expect(await registry.get("dev", "run", "res_q")).toEqual(records[1]);
      expect(await registry.get("dev", "run", "res_r")).toEqual(records[2]);
    });

    it("stay readable under each key once the others are removed", async () => {
      const registry = createRegistry(make(join(dir, "d")));
      const records = ["first", "second", "third"].map((c) => record("run", c));
      await commitAll(registry, records);
      await registry.remove("dev", "run", "res_first");
      await registry.remove("dev", "run", "res_third");
      expect(await registry.get("dev", "run", "res_first")).toBeUndefined();
      expect(await registry.get("dev", "run", "res_second")).toEqual(records[1]);
    });

    it("fall back to one put each when the pack cannot be written", async () => {
      const base = make(join(dir, "e"));
      const calls: string[] = [];
      const registry = createRegistry({
        ...base,
        async putMany() {
          calls.push("putMany");
          throw new Error("disk on fire");
        },
        async put(key, body, opts) {
          calls.push(key);
          // Of the records put one by one, the store refuses the first.
          if (key.endsWith("res_m")) throw new Error("disk on fire");
          return base.put(key, body, opts);
        },
      });
      const records = ["m", "n", "o"].map((c) => record("run", c));
      const results = await commitAll(registry, records);
      expect(results.map((r) => r.status)).toEqual(["rejected", "fulfilled", "fulfilled"]);
      expect(calls).toEqual(["putMany", ...records.map((r) => recordKey("dev", "run", r.handle))]);
      expect(await registry.get("dev", "run", "res_m")).toBeUndefined();
      expect(await registry.get("dev", "run", "res_n")).toEqual(records[1]);
      expect(await registry.get("dev", "run", "res_o")).toEqual(records[2]);
    });

    it("read a single record larger than the first read", async () => {
      const backend = make(join(dir, "f"));
      const registry = createRegistry(backend);
      const big = record("run", "big", 60 * 1024);
      await registry.commit(big, "run");
      expect(await registry.get("dev", "run", "res_big")).toEqual(big);
    });

    it("read a record deep in a pack without the records before it", async () => {
      const base = make(join(dir, "h"));
      let bytesRead = 0;
      const backend: Backend = {
        ...base,
        async get(key, opts) {
          const stream = await base.get(key, opts);
          return (async function* () {
            for await (const chunk of stream) {
              bytesRead += chunk.byteLength;
              yield chunk;
            }
          })();
        },
      };
      const registry = createRegistry(backend);
      const records = Array.from({ length: 40 }, (_, i) => record("run", `c${i}`));
      await commitAll(registry, records);
      const pack = await readAllBytes(await base.get(recordKey("dev", "run", "res_c39")));
      expect(pack.byteLength).toBeGreaterThan(3 * packHeadBytes);
      bytesRead = 0;
      expect(await registry.get("dev", "run", "res_c39")).toEqual(records[39]);
      // The first read, the record itself and the header once more.
      expect(bytesRead).toBeLessThan(packHeadBytes + 2 * 8192 + 4096);
    });

    it("read each record of a pack whose header outgrows the first read", async () => {
      const backend = make(join(dir, "j"));
      const registry = createRegistry(backend);
      // Keys of ~400 characters (segments stay under the 200 that would be digested): 64
      // header entries take ~28 KB.
      const run = "r".repeat(190);
      const records = Array.from({ length: 64 }, (_, i) => record(run, `${"k".repeat(180)}${i}`));
      await commitAll(registry, records);
      const first = recordKey("dev", run, records[0]?.handle ?? "");
      const pack = await readAllBytes(await backend.get(first));
      expect(pack.indexOf(0x0a)).toBeGreaterThan(16 * 1024);
      for (const r of records) expect(await registry.get("dev", run, r.handle)).toEqual(r);
    });

    it("read a record from the pack its name holds, even one replaced between reads", async () => {
      const base = make(join(dir, "i"));
      const key = recordKey("dev", "run", "res_c30");
      const first = Array.from({ length: 40 }, (_, i) => record("run", `c${i}`));
      const second = Array.from({ length: 40 }, (_, i) => record("run", `c${(i + 5) % 40}`, 3000));
      let swapped = false;
      const backend: Backend = {
        ...base,
        async get(getKey, opts) {
          // Once the first read has found the record past it, the name takes another pack.
          if (getKey === key && (opts?.offset ?? 0) > 0 && !swapped) {
            swapped = true;
            await base.delete(key);
            const pack = encodeRecordPack(
              second.map((r) => ({
                key: recordKey("dev", "run", r.handle),
                bytes: encodeRecord(r),
              })),
            );
            await base.put(key, bytesBody(pack));
          }
          return base.get(getKey, opts);
        },
      };
      const registry = createRegistry(backend);
      await commitAll(registry, first);
      expect(await registry.get("dev", "run", "res_c30")).toEqual(second[25]);
      expect(swapped).toBe(true);
    });

    it("report a record that is not its key's, or whose bytes lie elsewhere, as DATA_LOSS", async () => {
      const backend = make(join(dir, "k"));
      const registry = createRegistry(backend);
      const plant = async (handle: string, stored: unknown) => {
        const key = recordKey("dev", "run", handle);
        await backend.put(key, bytesBody(Buffer.from(JSON.stringify(stored))));
        return key;
      };
      const blob = { stride: 1, ownerRunId: "run" };
      // Bytes of another tenant, of another run than the one named, a registry, a line index
      // that is not the blob's: what a hand with write access to this run's registry could plant.
      const elsewhere = [
        { key: "t/other/r/run/b/c/u1" },
        { key: "t/dev/r/run2/b/c/u1" },
        { key: "t/dev/r/run/h/res_x" },
        { key: "t/dev/r/run/b/c/u1", indexKey: "t/other/r/run/b/c/u1.idx" },
        { key: "t/dev/r/run/b/c/u1", jsonIndexKey: "t/other/r/run/b/c/u1.jidx" },
        { key: "t/dev/r/run/b/c/u1", jsonIndexKey: "t/dev/r/run/b/c/u2.jidx" },
        { key: "t/dev/r/run/b/../../../../other/r/run/b/c/u1" },
      ];
      for (const [i, where] of elsewhere.entries()) {
        const key = await plant(`res_p${i}`, {
          ...record("run", `p${i}`),
          inline: undefined,
          stored: "blob",
          blob: { ...blob, ...where },
        });
        expect(await codeOf(registry.get("dev", "run", `res_p${i}`))).toBe(Code.DataLoss);
        expect(await codeOf(registry.readAt(key))).toBe(Code.DataLoss);
      }
      // Under one handle's key, another handle's record, or another tenant's.
      const key = await plant("res_q", record("run", "r"));
      expect(await codeOf(registry.get("dev", "run", "res_q"))).toBe(Code.DataLoss);
      expect(await codeOf(registry.readAt(key))).toBe(Code.DataLoss);
      await plant("res_s", { ...record("run", "s"), tenant: "other" });
      expect(await codeOf(registry.get("dev", "run", "res_s"))).toBe(Code.DataLoss);
      // A pack whose header sends one record's key to another record's bytes.
      const pair = ["m", "n"].map((c) => record("run2", c));
      const pack = encodeRecordPack(
        pair.map((r, i) => ({
          key: recordKey("dev", "run2", pair[1 - i]?.handle ?? ""),
          bytes: encodeRecord(r),
        })),
      );
      await backend.put(recordKey("dev", "run2", "res_m"), bytesBody(pack));
      expect(await codeOf(registry.get("dev", "run2", "res_m"))).toBe(Code.DataLoss);
      // A record the blob of which is the run's own reads as before.
      const own = {
        ...record("run", "own"),
        inline: undefined,
        stored: "blob",
        blob: {
          ...blob,
          key: "t/dev/r/run/b/own/u1",
          indexKey: "t/dev/r/run/b/own/u1.idx",
          jsonIndexKey: "t/dev/r/run/b/own/u1.jidx",
        },
      };
      await plant("res_own", own);
      expect(await registry.get("dev", "run", "res_own")).toEqual(own);
    });

    it("report a pack stored under a key it does not list as DATA_LOSS", async () => {
      const backend = make(join(dir, "g"));
      const registry = createRegistry(backend);
      await commitAll(
        registry,
        ["u", "v"].map((c) => record("run", c)),
      );
      const planted = recordKey("dev", "run", "res_w");
      const pack = await readAllBytes(await backend.get(recordKey("dev", "run", "res_u")));
      await backend.put(planted, bytesBody(pack));
      expect(await codeOf(registry.get("dev", "run", "res_w"))).toBe(Code.DataLoss);
      await backend.put(recordKey("dev", "run", "res_z"), bytesBody(Buffer.from("[cut")));
      expect(await codeOf(registry.get("dev", "run", "res_z"))).toBe(Code.DataLoss);
      // A pack cut short of a record its header lists, past what a reader reads first.
      const many = Array.from({ length: 30 }, (_, i) => record("cut", `c${i}`));
      await commitAll(registry, many);
      const last = recordKey("dev", "cut", "res_c29");
      const whole = await readAllBytes(await backend.get(last));
      expect(whole.byteLength).toBeGreaterThan(100_000);
      await backend.delete(last);
      await backend.put(last, bytesBody(whole.subarray(0, 100_000)));
      expect(await codeOf(registry.get("dev", "cut", "res_c29"))).toBe(Code.DataLoss);
      expect(await registry.get("dev", "cut", "res_c28")).toEqual(many[28]);
    });
  });

  describe(`registry on ${kind}: pages cut by size`, () => {
    const dir = scratchDir(`spillway-registry-budget-${kind}-`);

    it("end before the record that would pass the budget, and the next page starts at it", async () => {
      const registry = createRegistry(make(join(dir, "a")));
      // Sizes from 1 to 9 KiB of payload, in an order unrelated to their keys.
      const records = Array.from({ length: 60 }, (_, i) =>
        record("run", `c${String(i).padStart(2, "0")}`, 1024 * (1 + ((i * 7) % 9))),
      );
      await commitAll(registry, records);
      const sizeOf = (r: { sizeBytes: number }) => r.sizeBytes;
      const budget = 20 * 1024;
      const seen: string[] = [];
      let after: string | undefined;
      let pages = 0;
      do {
        const page = await registry.list("dev", "run", {
          after,
          limit: 1000,
          budget: { bytes: budget, sizeOf },
        });
        expect(page.records.length).toBeGreaterThan(0);
        expect(page.records.reduce((sum, r) => sum + sizeOf(r), 0)).toBeLessThanOrEqual(budget);
        seen.push(...page.records.map((r) => r.handle));
        after = page.nextAfter;
        pages++;
      } while (after !== undefined);
      expect(seen).toEqual(records.map((r) => r.handle));
      expect(pages).toBeGreaterThan((60 * 5) / 20);
    });

    it("always hold one record, however large, and never stop for one that costs nothing", async () => {
      const registry = createRegistry(make(join(dir, "b")));
      const records = ["a", "b", "c", "d"].map((c) => record("run", c, c === "b" ? 8192 : 1024));
      await commitAll(registry, records);
      // b alone is over the budget; c costs nothing (a record the caller leaves out).
      const sizeOf = (r: { handle: string; sizeBytes: number }) =>
        r.handle === "res_c" ? 0 : r.sizeBytes;
      const pages: string[][] = [];
      let after: string | undefined;
      do {
        const page = await registry.list("dev", "run", {
          after,
          limit: 1000,
          budget: { bytes: 4096, sizeOf },
        });
        pages.push(page.records.map((r) => r.handle));
        after = page.nextAfter;
      } while (after !== undefined);
      expect(pages).toEqual([["res_a"], ["res_b", "res_c"], ["res_d"]]);
    });
  });
}

describe("registry on filesystem: a pack on disk", () => {
  const dir = scratchDir("spillway-registry-disk-");

  it("is one file linked under every record's name, at most 64 records a file", async () => {
    const backend = createFilesystemBackend({ root: dir });
    const registry = createRegistry(backend);
    const records = Array.from({ length: 100 }, (_, i) => record("run", `c${i}`, 100));
    await commitAll(registry, records);
    const inodes = new Map<number, number>();
    for (const r of records) {
      const stats = statSync(join(dir, recordKey("dev", "run", r.handle)));
      inodes.set(stats.ino, stats.nlink);
    }
    // 100 records committed in one turn: a pack of 64 and one of 36, each file linked once
    // per record it holds.
    expect([...inodes.values()].sort((a, b) => a - b)).toEqual([36, 64]);
  });

  it("never holds another run's or tenant's record in a run's files", async () => {
    const root = join(dir, "isolated");
    const registry = createRegistry(createFilesystemBackend({ root }));
    // Records of two tenants and two runs committed in the same turn, as concurrent offloads
    // of different clients finish together.
    const records = Array.from({ length: 24 }, (_, i) => ({
      ...record(i % 4 < 2 ? "a" : "b", `c${i}`, 100),
      tenant: i % 2 === 0 ? "dev" : "other",
    }));
    await commitAll(registry, records);
    for (const r of records) {
      const bytes = readFileSync(join(root, recordKey(r.tenant, r.runId, r.handle)));
      for (const o of records) {
        if (o.tenant === r.tenant && o.runId === r.runId) continue;
        expect(bytes.includes(o.inline ?? "")).toBe(false);
      }
      expect(await registry.get(r.tenant, r.runId, r.handle)).toEqual(r);
    }
  });

  it("fails only the record whose name is taken by a directory, and commits the rest", async () => {
    const backend = createFilesystemBackend({ root: join(dir, "occupied") });
    const registry = createRegistry(backend);
    // An object below res_dir makes res_dir a directory on disk.
    await backend.put(`${recordKey("dev", "run", "res_dir")}/below`, bytesBody(Buffer.from("x")));
    const records = ["before", "dir", "after"].map((c) => record("run", c, 100));
    const results = await commitAll(registry, records);
    expect(
      await Promise.all(
        results.map((r) => (r.status === "fulfilled" ? "ok" : codeOf(Promise.reject(r.reason)))),
      ),
    ).toEqual(["ok", Code.FailedPrecondition, "ok"]);
    expect(await registry.get("dev", "run", "res_after")).toEqual(records[2]);
  });
});
