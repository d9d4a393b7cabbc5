import { randomBytes } from "node:crypto";
import { Code } from "@connectrpc/connect";
import type { SpillwayClient } from "@spillway/client";
import { afterEach, describe, expect, it } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import { bytesBody } from "../server/src/backends/body.js";
import { codeOf } from "./support/code-of.js";
import { serviceBackends, startTestServer, type TestServer } from "./support/test-server.js";

/** Every key the backend holds under prefix. */
async function keysUnder(t: TestServer, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for (;;) {
    const after = keys.at(-1);
    const page = await t.backend.list(prefix, after === undefined ? {} : { startAfter: after });
    keys.push(...page.keys);
    if (!page.truncated) return keys;
  }
}

/** Records the key of every object the server reads from its backend. */
function countingReads(reads: string[]): (backend: Backend) => Backend {
  return (backend) => ({
    ...backend,
    get(key, opts) {
      reads.push(key);
      return backend.get(key, opts);
    },
  });
}

/** Runs `task(0..count-1)`, 64 at a time (small offloads in flight go as batches). */
async function pool(count: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: 64 }, worker));
}

const read = async (sdk: SpillwayClient, runId: string, handle: string) =>
  (await sdk.readToolOutput({ runId, handle })).rendered;

const blob = (label: string) => `${label}\n${"payload line\n".repeat(5000)}`;

describe.each(serviceBackends)("DeleteRun (%s)", (backendKind) => {
  let t: TestServer;
  const reads: string[] = [];
  afterEach(() => t.stop());

  it("removes every object of a run of more than a listing page, reading none of its records", async () => {
    t = await startTestServer({ backend: backendKind, wrapBackend: countingReads(reads) });
    const sdk = t.sdk();
    const count = 1_050;
    // Mostly inline records, every 100th a blob with a line index.
    await pool(count, (i) =>
      sdk.offload(
        { tenant: "dev", runId: "big", callId: `c${i}` },
        i % 100 === 0 ? blob(`c${i}`) : randomBytes(512),
      ),
    );
    await sdk.offload({ tenant: "dev", runId: "other", callId: "kept" }, blob("kept"));
    await sdk.setRunTtl("big", 3600);
    expect((await keysUnder(t, "t/dev/r/big/")).length).toBeGreaterThan(count);

    reads.length = 0;
    const res = await sdk.deleteRun("big");
    expect(res.deletedAttachments).toBe(BigInt(count));
    expect(reads.filter((key) => key.startsWith("t/dev/r/big/h/"))).toEqual([]);
    expect(await keysUnder(t, "t/dev/r/big/")).toEqual([]);
    expect((await sdk.list("big")).attachments).toEqual([]);
    expect(await codeOf(sdk.stat("big", "res_c1"))).toBe(Code.PermissionDenied);
    expect((await sdk.readToolOutput({ runId: "other", handle: "res_kept" })).rendered).toContain(
      "kept",
    );
  });

  it("keeps the bytes forks of forks still use, frees them with the last fork, reads no record", async () => {
    t = await startTestServer({ backend: backendKind, wrapBackend: countingReads(reads) });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "p", callId: "p1" }, blob("from p"));
    await sdk.offload({ tenant: "dev", runId: "p", callId: "p2" }, "small from p\n");
    await sdk.forkRun("p", "c");
    await sdk.offload({ tenant: "dev", runId: "c", callId: "c1" }, blob("from c"));
    await sdk.forkRun("c", "g");
    await sdk.offload({ tenant: "dev", runId: "g", callId: "g1" }, blob("from g"));
    const blobs = async () => (await keysUnder(t, "t/dev/r/")).filter((k) => k.includes("/b/"));

    // Deletes `run`, which held `records`, reading none of the records it frees.
    const deleteReadingNoRecord = async (run: string, records: bigint) => {
      reads.length = 0;
      expect((await sdk.deleteRun(run)).deletedAttachments).toBe(records);
      expect(reads.filter((key) => /^t\/dev\/r\/[^/]+\/h\//.test(key))).toEqual([]);
    };
    await deleteReadingNoRecord("p", 2n);
    expect(await read(sdk, "c", "res_p1")).toContain("from p");
    expect(await read(sdk, "g", "res_p1")).toContain("from p");
    expect(await read(sdk, "g", "res_p2")).toContain("small from p");

    await deleteReadingNoRecord("c", 3n);
    expect(await read(sdk, "g", "res_p1")).toContain("from p");
    expect(await read(sdk, "g", "res_c1")).toContain("from c");
    expect(await read(sdk, "g", "res_g1")).toContain("from g");

    await deleteReadingNoRecord("g", 4n);
    expect(await blobs()).toEqual([]);
    expect(await keysUnder(t, "t/dev/r/")).toEqual([]);
  });

  it("frees a parent's bytes when a fork's delete is repeated after dying past its registry", async () => {
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "p", callId: "p1" }, blob("from p"));
    await sdk.forkRun("p", "c");
    await sdk.deleteRun("p");
    expect((await keysUnder(t, "t/dev/r/p/")).some((k) => k.includes("/b/"))).toBe(true);
    // What a delete of c leaves when the process dies after removing the registry and meta.
    await t.backend.deleteMany([
      ...(await keysUnder(t, "t/dev/r/c/h/")),
      ...(await keysUnder(t, "t/dev/r/c/meta")),
    ]);
    expect((await sdk.deleteRun("c")).deletedAttachments).toBe(0n);
    expect(await keysUnder(t, "t/dev/r/")).toEqual([]);
  });

  it("frees a parent's bytes with a fork made before forks listed their owners", async () => {
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "p", callId: "p1" }, blob("from p"));
    await sdk.forkRun("p", "c");
    // Such a fork has a meta without ownerRefs and no owner references.
    const meta = "t/dev/r/c/meta";
    await t.backend.deleteMany([meta, ...(await keysUnder(t, "t/dev/r/c/o/"))]);
    await t.backend.put(
      meta,
      bytesBody(Buffer.from(JSON.stringify({ createdMs: 1, parentRunId: "p" }))),
    );
    await sdk.deleteRun("p");
    expect(await read(sdk, "c", "res_p1")).toContain("from p");
    expect((await sdk.deleteRun("c")).deletedAttachments).toBe(1n);
    expect(await keysUnder(t, "t/dev/r/")).toEqual([]);
  });
});
