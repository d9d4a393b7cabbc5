import { Code, ConnectError } from "@connectrpc/connect";
import type { SpillwayClient } from "@spillway/client";
import { afterEach, describe, expect, it } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import { bytesBody, readObject } from "../server/src/backends/body.js";
import { createSweeper } from "../server/src/sweeper.js";
import { codeOf, failureOf } from "./support/code-of.js";
import { listenerWarningsOf } from "./support/listener-warnings.js";
import { readBack } from "./support/read-back.js";
import { startTestServer, type TestBackendKind, type TestServer } from "./support/test-server.js";

const backends: readonly TestBackendKind[] = [
  "memory",
  "filesystem",
  "s3-minio",
  "s3-seaweedfs",
  "s3-moto",
];

const big = (label: string) => `${label}\n${"payload line\n".repeat(5000)}`;

async function handlesOf(sdk: SpillwayClient, runId: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const a of sdk.listAll(runId)) out.set(a.handle, a.sha256);
  return out;
}

async function text(sdk: SpillwayClient, runId: string, handle: string): Promise<string> {
  return (await readBack(sdk, runId, handle)).toString();
}

/** Every key the backend holds. */
async function storedKeys(backend: Backend): Promise<string[]> {
  const keys: string[] = [];
  for (;;) {
    const after = keys.at(-1);
    const page = await backend.list("t/", after === undefined ? {} : { startAfter: after });
    keys.push(...page.keys);
    if (!page.truncated) return keys.sort();
  }
}

describe.each(backends)("MergeRun (%s)", (backendKind) => {
  let t: TestServer;
  afterEach(() => t.stop());

  it("brings the child's own outputs into the parent, shares their bytes, survives the child's deletion", async () => {
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "p", callId: "before" }, big("parent"));
    await sdk.forkRun("p", "c");
    await sdk.offload({ tenant: "dev", runId: "c", callId: "big" }, big("child"));
    await sdk.offload({ tenant: "dev", runId: "c", callId: "small" }, "small\n");
    await sdk.offload({ tenant: "dev", runId: "p", callId: "later" }, "later in parent\n");
    const blobsBefore = (await storedKeys(t.backend)).filter((k) => k.includes("/b/"));

    const res = await sdk.mergeRun("c", "p");
    expect([res.mergedAttachments, res.unchangedAttachments]).toEqual([2n, 0n]);
    // No byte was copied: the same blobs, none under the parent's prefix for the child's output.
    expect((await storedKeys(t.backend)).filter((k) => k.includes("/b/"))).toEqual(blobsBefore);

    const parent = await handlesOf(sdk, "p");
    expect([...parent.keys()].sort()).toEqual(["res_before", "res_big", "res_later", "res_small"]);
    expect(await text(sdk, "p", "res_big")).toBe(big("child"));
    const runs = (await sdk.raw.listRuns({})).runs.find((r) => r.runId === "p");
    expect(runs?.outputCount).toBe(4n);

    // Repeating it changes nothing.
    const again = await sdk.mergeRun("c", "p");
    expect([again.mergedAttachments, again.unchangedAttachments]).toEqual([0n, 2n]);

    // Deleting the child keeps every byte the parent now uses.
    await sdk.deleteRun("c");
    expect(await text(sdk, "p", "res_big")).toBe(big("child"));
    expect(await text(sdk, "p", "res_small")).toBe("small\n");
    expect(await text(sdk, "p", "res_before")).toBe(big("parent"));
    // Deleting the parent then leaves nothing of either.
    await sdk.deleteRun("p");
    expect(await storedKeys(t.backend)).toEqual([]);
  });

  it("keeps merged bytes through a sweep of orphans after the child is deleted", async () => {
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "p", callId: "base" }, big("parent"));
    await sdk.forkRun("p", "c");
    await sdk.offload({ tenant: "dev", runId: "c", callId: "big" }, big("child"));
    await sdk.mergeRun("c", "p");
    await sdk.deleteRun("c");
    const report = await createSweeper(t.server.core, {
      intervalMs: 60_000,
      orphanAgeMs: 0,
    }).sweepOnce();
    expect(report?.orphanBlobs).toBe(0);
    expect(await text(sdk, "p", "res_big")).toBe(big("child"));
    expect(await text(sdk, "p", "res_base")).toBe(big("parent"));
    // A fork of the parent now inherits the merged output (not as its own) and reads it.
    await sdk.forkRun("p", "d");
    expect(await text(sdk, "d", "res_big")).toBe(big("child"));
    expect((await sdk.mergeRun("d", "p")).mergedAttachments).toBe(0n);
  });

  it("is all or nothing: one handle held with other bytes merges none (ALREADY_EXISTS)", async () => {
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await sdk.forkRun("p", "c");
    await sdk.offload({ tenant: "dev", runId: "c", callId: "a" }, "child a\n");
    await sdk.offload({ tenant: "dev", runId: "c", callId: "same" }, "same bytes\n");
    await sdk.offload({ tenant: "dev", runId: "c", callId: "z" }, big("child z"));
    await sdk.offload({ tenant: "dev", runId: "p", callId: "same" }, "same bytes\n");
    await sdk.offload({ tenant: "dev", runId: "p", callId: "z" }, "other bytes\n");
    const err = await failureOf(sdk.mergeRun("c", "p"));
    expect(err.code).toBe(Code.AlreadyExists);
    expect(err.rawMessage).toContain('"res_z"');
    expect([...(await handlesOf(sdk, "p")).keys()].sort()).toEqual(["res_same", "res_z"]);
    expect(await codeOf(sdk.readToolOutput({ runId: "p", handle: "res_a" }))).toBe(
      Code.PermissionDenied,
    );
    // Same bytes count as unchanged once the conflict is gone (a different parent here).
    await sdk.forkRun("q", "d");
    await sdk.offload({ tenant: "dev", runId: "d", callId: "same" }, "same bytes\n");
    await sdk.offload({ tenant: "dev", runId: "q", callId: "same" }, "same bytes\n");
    const ok = await sdk.mergeRun("d", "q");
    expect([ok.mergedAttachments, ok.unchangedAttachments]).toEqual([0n, 1n]);
  });

  it("refuses a fork into a deleted child's id while the parent holds its merged bytes", async () => {
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "p", callId: "a" }, "parent a\n");
    await sdk.forkRun("p", "c");
    await sdk.offload({ tenant: "dev", runId: "c", callId: "k" }, big("child k"));
    await sdk.mergeRun("c", "p");
    await sdk.deleteRun("c");
    // "c" is held: p's merged record reads c's bytes, which go once p lets them go. A fork
    // given the id would own what lands under it and lose it then.
    const err = await failureOf(sdk.forkRun("p", "c"));
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toContain('run "c" was deleted and its id is still held by forks');
    expect(await handlesOf(sdk, "c")).toEqual(new Map());
    expect((await sdk.readToolOutput({ runId: "p", handle: "res_k" })).rendered).toContain(
      "child k",
    );
  });

  it("refuses what is not a fork of that parent, and a missing child", async () => {
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "p", callId: "x" }, "x\n");
    await sdk.offload({ tenant: "dev", runId: "plain", callId: "x" }, "x\n");
    await sdk.forkRun("p", "c");
    expect(await codeOf(sdk.mergeRun("nothing", "p"))).toBe(Code.NotFound);
    expect(await codeOf(sdk.mergeRun("c", "plain"))).toBe(Code.FailedPrecondition);
    expect(await codeOf(sdk.mergeRun("plain", "p"))).toBe(Code.FailedPrecondition);
    expect(await codeOf(sdk.mergeRun("c", "c"))).toBe(Code.InvalidArgument);
    expect(await codeOf(sdk.raw.mergeRun({ childRunId: "", parentRunId: "p" }))).toBe(
      Code.InvalidArgument,
    );
    await sdk.deleteRun("c");
    expect(await codeOf(sdk.mergeRun("c", "p"))).toBe(Code.NotFound);
  });
});

/** Faults a test arms: each is called before the backend call it names and may throw or wait. */
interface Faults {
  beforePut?: (key: string) => Promise<void>;
  beforeDelete?: (key: string) => Promise<void>;
}

function withFaults(faults: Faults): (backend: Backend) => Backend {
  return (backend) => ({
    ...backend,
    async put(key, body, opts) {
      await faults.beforePut?.(key);
      return backend.put(key, body, opts);
    },
    async delete(key, opts) {
      await faults.beforeDelete?.(key);
      return backend.delete(key, opts);
    },
  });
}

describe.each(["memory", "filesystem", "s3-minio"] as const)(
  "MergeRun cut short at each step (%s)",
  (backendKind) => {
    let t: TestServer;
    afterEach(() => t.stop());

    let clock = Date.now();
    /** onePutPerRecord leaves putMany out, so faults see each record's own put. */
    const setUp = async (faults: Faults, opts: { onePutPerRecord?: boolean } = {}) => {
      clock = Date.now();
      t = await startTestServer({
        backend: backendKind,
        wrapBackend: (backend) => {
          const { putMany, ...each } = withFaults(faults)(backend);
          return opts.onePutPerRecord === true || putMany === undefined
            ? each
            : { ...each, putMany };
        },
        now: () => clock,
      });
      const sdk = t.sdk();
      await sdk.offload({ tenant: "dev", runId: "p", callId: "base" }, "base\n");
      await sdk.forkRun("p", "c");
      for (let i = 0; i < 20; i++) {
        await sdk.offload({ tenant: "dev", runId: "c", callId: `h${i}` }, `child ${i}\n`);
      }
      return sdk;
    };
    const registryKeys = async (runId: string) =>
      (await storedKeys(t.backend)).filter((k) => k.startsWith(`t/dev/r/${runId}/h/`));

    it("fails before its outcome: none of it shows, and the retry completes it", async () => {
      const faults: Faults = {};
      const sdk = await setUp(faults);
      faults.beforePut = async (key) => {
        if (key.includes("/m/o/")) throw new ConnectError("store went away", Code.Unavailable);
      };
      expect(await codeOf(sdk.mergeRun("c", "p"))).toBe(Code.Unavailable);
      // Every record was written, none is visible: listed, read, counted, forked or offloaded over.
      expect(await registryKeys("p")).toHaveLength(21);
      expect([...(await handlesOf(sdk, "p")).keys()]).toEqual(["res_base"]);
      expect(await codeOf(sdk.stat("p", "res_h3"))).toBe(Code.PermissionDenied);
      expect((await sdk.raw.listRuns({})).runs.find((r) => r.runId === "p")?.outputCount).toBe(1n);
      expect(
        await codeOf(sdk.offload({ tenant: "dev", runId: "p", callId: "h3" }, "other\n")),
      ).toBe(Code.Aborted);
      faults.beforePut = undefined;
      const res = await sdk.mergeRun("c", "p");
      expect([res.mergedAttachments, res.unchangedAttachments]).toEqual([20n, 0n]);
      expect((await handlesOf(sdk, "p")).size).toBe(21);
      expect(await text(sdk, "p", "res_h3")).toBe("child 3\n");
      expect((await storedKeys(t.backend)).filter((k) => k.includes("/m/i/"))).toEqual([]);
    });

    it("fails before its outcome and is never retried: the sweep finishes it after 10 minutes", async () => {
      const faults: Faults = {};
      const sdk = await setUp(faults);
      faults.beforePut = async (key) => {
        if (key.includes("/m/o/")) throw new ConnectError("store went away", Code.Unavailable);
      };
      expect(await codeOf(sdk.mergeRun("c", "p"))).toBe(Code.Unavailable);
      faults.beforePut = undefined;
      const sweeper = createSweeper(t.server.core, { intervalMs: 60_000, orphanAgeMs: 3_600_000 });
      // A merge that may still be under way is left to its executor.
      expect((await sweeper.sweepOnce())?.staleMerges).toBe(0);
      expect([...(await handlesOf(sdk, "p")).keys()]).toEqual(["res_base"]);
      clock += 11 * 60 * 1000;
      // Finishing it reads its records a batch at a time, each read listening on the sweep's
      // signal: no leak for Node to warn the operator about.
      const warnings = await listenerWarningsOf(async () => {
        expect(await sweeper.sweepOnce()).toMatchObject({ staleMerges: 1, refused: 0 });
      });
      expect(warnings).toEqual([]);
      expect((await handlesOf(sdk, "p")).size).toBe(21);
      expect((await storedKeys(t.backend)).filter((k) => k.includes("/m/i/"))).toEqual([]);
      const res = await sdk.mergeRun("c", "p");
      expect([res.mergedAttachments, res.unchangedAttachments]).toEqual([0n, 20n]);
    });

    it("follows no journal stored under another run than the one it names", async () => {
      const faults: Faults = {};
      const sdk = await setUp(faults);
      faults.beforePut = async (key) => {
        if (key.includes("/m/o/")) throw new ConnectError("store went away", Code.Unavailable);
      };
      expect(await codeOf(sdk.mergeRun("c", "p"))).toBe(Code.Unavailable);
      faults.beforePut = undefined;
      // A copy of the journal planted under another run, as a store-level writer could.
      const [journal] = (await storedKeys(t.backend)).filter((k) => k.includes("/m/i/"));
      const bytes = await readObject(t.backend, journal ?? "", 1 << 20);
      const planted = (journal ?? "").replace("/r/p/", "/r/victim/");
      await t.backend.put(planted, bytesBody(bytes ?? new Uint8Array()));
      await sdk.forkRun("victim", "v2");
      await sdk.offload({ tenant: "dev", runId: "v2", callId: "own" }, "own\n");
      expect(await codeOf(sdk.mergeRun("v2", "victim"))).toBe(Code.DataLoss);
      clock += 11 * 60 * 1000;
      const sweeper = createSweeper(t.server.core, { intervalMs: 60_000, orphanAgeMs: 3_600_000 });
      // The real journal is finished; the planted one is refused and followed nowhere.
      expect(await sweeper.sweepOnce()).toMatchObject({ staleMerges: 1, refused: 1 });
      expect((await handlesOf(sdk, "p")).size).toBe(21);
      expect(await registryKeys("victim")).toEqual([]);
      expect((await storedKeys(t.backend)).filter((k) => k.includes("/m/i/"))).toEqual([planted]);
    });

    it("is cut short after its journal and the child is replaced: the sweep merges none of the new bytes", async () => {
      const faults: Faults = {};
      const sdk = await setUp(faults);
      let journaled = false;
      faults.beforePut = async (key) => {
        if (journaled) throw new ConnectError("store went away", Code.Unavailable);
        if (key.includes("/m/i/")) journaled = true;
      };
      expect(await codeOf(sdk.mergeRun("c", "p"))).toBe(Code.Unavailable);
      faults.beforePut = undefined;
      // The operator discards the child and a replayed run takes its id, with the same call ids.
      await sdk.deleteRun("c");
      await sdk.forkRun("p", "c");
      for (let i = 0; i < 20; i++) {
        await sdk.offload({ tenant: "dev", runId: "c", callId: `h${i}` }, `replayed ${i}\n`);
      }
      clock += 11 * 60 * 1000;
      const sweeper = createSweeper(t.server.core, { intervalMs: 60_000, orphanAgeMs: 3_600_000 });
      expect(await sweeper.sweepOnce()).toMatchObject({ staleMerges: 1, refused: 0 });
      // The journal named the bytes it checked; the replayed run's were never asked for.
      expect([...(await handlesOf(sdk, "p")).keys()]).toEqual(["res_base"]);
      // Whatever the cut-short call wrote is gone with its journal: no handle stays held.
      expect(await registryKeys("p")).toHaveLength(1);
      expect((await storedKeys(t.backend)).filter((k) => k.includes("/m/i/"))).toEqual([]);
      expect(
        (await sdk.offloadResult({ tenant: "dev", runId: "p", callId: "h3" }, "parent 3\n"))
          .created,
      ).toBe(true);
    });

    it("meets a record taken back between its write and its read: writes it again", async () => {
      const faults: Faults = {};
      const sdk = await setUp(faults, { onePutPerRecord: true });
      // Another merge's aborted record held the handle when the write was refused, and was taken
      // back before the read: the handle is free again.
      faults.beforePut = async (key) => {
        if (!key.endsWith("/r/p/h/res_h5")) return;
        faults.beforePut = undefined;
        throw new ConnectError("object exists", Code.AlreadyExists);
      };
      const res = await sdk.mergeRun("c", "p");
      expect([res.mergedAttachments, res.unchangedAttachments]).toEqual([20n, 0n]);
      expect(await text(sdk, "p", "res_h5")).toBe("child 5\n");
      expect((await storedKeys(t.backend)).filter((k) => k.includes("/m/i/"))).toEqual([]);
    });

    it("fails to clear its journal after its outcome: succeeds, and the next merge clears it", async () => {
      const faults: Faults = {};
      const sdk = await setUp(faults);
      faults.beforeDelete = async (key) => {
        if (key.includes("/m/i/")) throw new ConnectError("store went away", Code.Unavailable);
      };
      // Committed is the answer, though the journal could not be cleared.
      expect((await sdk.mergeRun("c", "p")).mergedAttachments).toBe(20n);
      expect((await handlesOf(sdk, "p")).size).toBe(21);
      expect((await storedKeys(t.backend)).filter((k) => k.includes("/m/i/"))).toHaveLength(1);
      faults.beforeDelete = undefined;
      const res = await sdk.mergeRun("c", "p");
      expect([res.mergedAttachments, res.unchangedAttachments]).toEqual([0n, 20n]);
      expect((await storedKeys(t.backend)).filter((k) => k.includes("/m/i/"))).toEqual([]);
    });

    it("meets an offload that took a handle after its check: aborts and takes back every record", async () => {
      const faults: Faults = {};
      const sdk = await setUp(faults);
      faults.beforePut = async (key) => {
        if (!key.includes("/m/i/")) return;
        faults.beforePut = undefined;
        // Between the check and the first record: the offload commits first.
        await sdk.offload({ tenant: "dev", runId: "p", callId: "h17" }, "the parent's own\n");
      };
      const err = await failureOf(sdk.mergeRun("c", "p"));
      expect(err.code).toBe(Code.AlreadyExists);
      expect(err.rawMessage).toContain('"res_h17"');
      expect([...(await handlesOf(sdk, "p")).keys()].sort()).toEqual(["res_base", "res_h17"]);
      // No record of the merge is left to hold a handle: the others take offloads again.
      expect(await registryKeys("p")).toHaveLength(2);
      expect(
        (await sdk.offloadResult({ tenant: "dev", runId: "p", callId: "h3" }, "parent 3\n"))
          .created,
      ).toBe(true);
      expect((await storedKeys(t.backend)).filter((k) => k.includes("/m/i/"))).toEqual([]);
    });
  },
);

describe("MergeRun: limits, TTLs, tenants (filesystem)", () => {
  let t: TestServer;
  afterEach(() => t.stop());

  it("keeps the parent within max_run_bytes, all or nothing", async () => {
    t = await startTestServer({ limits: { maxRunBytes: 100_000 } });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "p", callId: "p1" }, "x".repeat(40_000));
    await sdk.forkRun("p", "c");
    await sdk.offload({ tenant: "dev", runId: "c", callId: "c1" }, "y".repeat(30_000));
    await sdk.offload({ tenant: "dev", runId: "c", callId: "c2" }, "z".repeat(35_000));
    const err = await failureOf(sdk.mergeRun("c", "p"));
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.rawMessage).toContain("max_run_bytes 100000");
    expect([...(await handlesOf(sdk, "p")).keys()]).toEqual(["res_p1"]);

    // Within the limit it merges, and the merged bytes count against the parent afterwards.
    await sdk.forkRun("p", "small");
    await sdk.offload({ tenant: "dev", runId: "small", callId: "s1" }, "s".repeat(50_000));
    expect((await sdk.mergeRun("small", "p")).mergedAttachments).toBe(1n);
    expect(
      await codeOf(sdk.offload({ tenant: "dev", runId: "p", callId: "p2" }, "w".repeat(20_000))),
    ).toBe(Code.ResourceExhausted);
  });

  it("merges only live outputs, keeps their own TTL, and the parent's run TTL bounds them", async () => {
    let clock = Date.now();
    t = await startTestServer({ now: () => clock });
    const sdk = t.sdk();
    await sdk.forkRun("p", "c");
    await sdk.offload({ tenant: "dev", runId: "c", callId: "short" }, "short\n", {
      ttl: { seconds: 10n },
    });
    await sdk.offload({ tenant: "dev", runId: "c", callId: "long" }, "long\n", {
      ttl: { seconds: 1000n },
    });
    await sdk.offload({ tenant: "dev", runId: "c", callId: "gone" }, "gone\n", {
      ttl: { seconds: 1n },
    });
    await sdk.offload({ tenant: "dev", runId: "p", callId: "base" }, "base\n");
    await sdk.setRunTtl("p", 100);
    clock += 5_000;
    expect((await sdk.mergeRun("c", "p")).mergedAttachments).toBe(2n);
    const listed = (await sdk.raw.listToolOutputs({ runId: "p" })).attachments;
    const expiry = new Map(listed.map((a) => [a.handle, Number(a.expireTime?.seconds)]));
    expect([...expiry.keys()].sort()).toEqual(["res_base", "res_long", "res_short"]);
    // Its own expiry (10 s after offload) and the parent's run expiry (100 s) for the longer.
    expect(expiry.get("res_short")).toBeLessThan(expiry.get("res_long") ?? 0);
    clock += 10_000;
    expect([...(await handlesOf(sdk, "p")).keys()].sort()).toEqual(["res_base", "res_long"]);
    clock += 100_000;
    expect(await codeOf(sdk.mergeRun("c", "p"))).toBe(Code.NotFound);
  });

  it("never reveals another tenant's runs", async () => {
    t = await startTestServer({ tokens: { ta: "alpha", tb: "beta" } });
    const a = t.sdk("ta");
    const b = t.sdk("tb");
    await a.forkRun("p", "c");
    await a.offload({ tenant: "alpha", runId: "c", callId: "x" }, "secret\n");
    const err = await failureOf(b.mergeRun("c", "p"));
    expect(err.code).toBe(Code.NotFound);
    await b.forkRun("p", "own");
    expect(await codeOf(b.mergeRun("own", "p"))).not.toBe(Code.Unimplemented);
    expect((await b.mergeRun("own", "p")).mergedAttachments).toBe(0n);
    expect((await a.mergeRun("c", "p")).mergedAttachments).toBe(1n);
    expect([...(await handlesOf(b, "p")).keys()]).toEqual([]);
  });

  it("lists a parent whose only outputs were merged, updated at the merge", async () => {
    let clock = Date.now();
    t = await startTestServer({ now: () => clock });
    const sdk = t.sdk();
    // A fork of a run that holds nothing yet: the parent exists only through the merge.
    await sdk.forkRun("fresh", "worker");
    await sdk.offload({ tenant: "dev", runId: "worker", callId: "w" }, "work\n");
    clock += 60_000;
    expect((await sdk.mergeRun("worker", "fresh")).mergedAttachments).toBe(1n);
    const run = (await sdk.raw.listRuns({})).runs.find((r) => r.runId === "fresh");
    expect(run?.outputCount).toBe(1n);
    expect(run?.sizeBytes).toBe(5n);
    expect(Number(run?.updateTime?.seconds) * 1000).toBeGreaterThanOrEqual(clock - 1000);
  });

  it("announces merge_run among the server's features", async () => {
    t = await startTestServer();
    expect((await t.sdk().serverInfo()).features).toContain("merge_run");
  });
});

describe.each(["filesystem", "s3-minio"] as const)(
  "MergeRun racing offloads of the same handles (%s)",
  (backendKind) => {
    let t: TestServer;
    afterEach(() => t.stop());

    it("two forks merging the same handles at once: one wins whole, the other merges nothing", async () => {
      t = await startTestServer({ backend: backendKind });
      const sdk = t.sdk();
      const won = { a: 0, b: 0 };
      for (let round = 0; round < 8; round++) {
        const p = `p${round}`;
        await sdk.offload({ tenant: "dev", runId: p, callId: "base" }, "base\n");
        for (const side of ["a", "b"]) {
          await sdk.forkRun(p, `${p}-${side}`);
          for (let i = 0; i < 10; i++) {
            await sdk.offload(
              { tenant: "dev", runId: `${p}-${side}`, callId: `h${i}` },
              `${side} ${i}\n`,
            );
          }
        }
        const [a, b] = await Promise.all([
          codeOf(sdk.mergeRun(`${p}-a`, p)),
          codeOf(sdk.mergeRun(`${p}-b`, p)),
        ]);
        // At most one wins; a loser retried after the winner is ALREADY_EXISTS.
        expect(a === undefined && b === undefined).toBe(false);
        for (const [side, code] of [
          ["a", a],
          ["b", b],
        ] as const) {
          if (code === undefined) won[side]++;
          else expect([Code.AlreadyExists, Code.Aborted]).toContain(code);
        }
        const winner = a === undefined ? "a" : b === undefined ? "b" : undefined;
        const shown = await handlesOf(sdk, p);
        if (winner === undefined) {
          expect([...shown.keys()]).toEqual(["res_base"]);
        } else {
          expect(shown.size).toBe(11);
          for (let i = 0; i < 10; i++)
            expect(await text(sdk, p, `res_h${i}`)).toBe(`${winner} ${i}\n`);
        }
        const loser = winner === "a" ? "b" : "a";
        expect(await codeOf(sdk.mergeRun(`${p}-${loser}`, p))).toBe(
          winner === undefined ? undefined : Code.AlreadyExists,
        );
      }
      console.log(`concurrent merges (${backendKind}): ${JSON.stringify(won)}`);
      expect(won.a + won.b).toBeGreaterThan(0);
    });

    it("exactly one of the merge and the offload wins a handle; nothing is torn", async () => {
      t = await startTestServer({ backend: backendKind });
      const sdk = t.sdk();
      const count = 30;
      const won = { merge: 0, offload: 0 };
      for (let round = 0; round < 16; round++) {
        const [p, c] = [`p${round}`, `c${round}`];
        await sdk.offload({ tenant: "dev", runId: p, callId: "base" }, "base\n");
        await sdk.forkRun(p, c);
        await Promise.all(
          Array.from({ length: count }, (_, i) =>
            sdk.offload({ tenant: "dev", runId: c, callId: `h${i}` }, `child ${i}\n`),
          ),
        );
        // One handle is offloaded to the parent with other bytes, before, during or after the
        // merge's writes.
        const raced = (round * 7) % count;
        const merge = codeOf(sdk.mergeRun(c, p));
        await new Promise((r) => setTimeout(r, round * (backendKind === "filesystem" ? 4 : 25)));
        const offload = codeOf(
          sdk.offload({ tenant: "dev", runId: p, callId: `h${raced}` }, "parent bytes\n"),
        );
        const [mergeCode, offloadCode] = await Promise.all([merge, offload]);
        const shown = await handlesOf(sdk, p);
        if (mergeCode === undefined) {
          won.merge++;
          expect([Code.AlreadyExists, Code.Aborted]).toContain(offloadCode);
          expect(shown.size).toBe(count + 1);
          expect(await text(sdk, p, `res_h${raced}`)).toBe(`child ${raced}\n`);
        } else {
          won.offload++;
          expect(mergeCode).toBe(Code.AlreadyExists);
          expect(offloadCode).toBeUndefined();
          // Nothing of the merge shows; the offload's bytes hold the handle.
          expect([...shown.keys()].sort()).toEqual(["res_base", `res_h${raced}`]);
          expect(await text(sdk, p, `res_h${raced}`)).toBe("parent bytes\n");
        }
      }
      console.log(`merge races (${backendKind}): ${JSON.stringify(won)}`);
      // Both sides won some rounds, so the race was real.
      expect(won.merge).toBeGreaterThan(0);
      expect(won.offload).toBeGreaterThan(0);
    });
  },
);
