import { Code } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bytesBody } from "../server/src/backends/body.js";
import { runTtlKey } from "../server/src/keys.js";
import { createSweeper } from "../server/src/sweeper.js";
import { codeOf } from "./support/code-of.js";
import { storeGates } from "./support/store-gates.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/**
 * A run's TTL belongs to that run: it never outlives it to expire the next run given its id,
 * and the sweep never deletes what was acknowledged after it read the run or record as expired.
 */
describe("run TTLs against deletes, sweeps and new runs of the same id", () => {
  let t: TestServer;
  let clock = Date.now();
  let gates = storeGates();
  // Each test on a store of its own, the clock its own to move and store calls its to hold.
  beforeEach(async () => {
    clock = Date.now();
    gates = storeGates();
    t = await startTestServer({ backend: "filesystem", now: () => clock, wrapBackend: gates.wrap });
  });
  afterEach(() => t.stop());
  const sweep = () =>
    createSweeper(t.server.core, { intervalMs: 60_000, orphanAgeMs: 3_600_000 }).sweepOnce();
  const key = (runId: string, callId: string) => ({ tenant: "dev", runId, callId });

  it("drops the TTL of a run whose outputs all expired once the sweep removes them", async () => {
    const sdk = t.sdk();
    await sdk.offload(key("x", "old"), "short-lived\n", { ttl: { seconds: 1n, nanos: 0 } });
    clock += 2_000;
    // Its record is still there, expired: the run counts as existing until the sweep.
    await sdk.setRunTtl("x", 4);
    // The sweep removed the expired output and kept the TTL, which expired the next run.
    await sweep();
    await sdk.offload(key("x", "new"), "a new run under the old id\n");
    clock += 3_600_000;
    const read = await sdk.readToolOutput({ runId: "x", handle: "res_new" });
    expect(read.rendered).toContain("a new run under the old id");
  });

  it("takes back a TTL written after a DeleteRun removed the run", async () => {
    const sdk = t.sdk();
    await sdk.offload(key("y", "first"), "the first run\n");
    // SetRunTtl has found the run live; its TTL waits while DeleteRun removes everything.
    const write = gates.at("/r/y/ttl");
    const setTtl = codeOf(sdk.setRunTtl("y", 5));
    await write.reached;
    await sdk.deleteRun("y");
    write.open();
    expect(await setTtl).toBe(Code.NotFound);
    await sdk.offload(key("y", "second"), "a new run under the old id\n");
    clock += 60_000;
    const read = await sdk.readToolOutput({ runId: "y", handle: "res_second" });
    expect(read.rendered).toContain("a new run under the old id");
  });

  it("refuses offloads into an expired run until its sweep has deleted all of it", async () => {
    const sdk = t.sdk();
    await sdk.offload(key("v", "old"), "a line of the old run\n".repeat(3_000));
    await sdk.setRunTtl("v", 1);
    clock += 2_000;
    // The sweep's delete of the run is at its blobs; its TTL went before them, and an offload
    // then was acknowledged and deleted with the rest.
    const blobs = gates.at("/r/v/b/");
    const swept = sweep();
    await blobs.reached;
    expect(await codeOf(sdk.offload(key("v", "during"), "offloaded during the sweep\n"))).toBe(
      Code.FailedPrecondition,
    );
    blobs.open();
    expect((await swept)?.expiredRuns).toBe(1);
    await sdk.offload(key("v", "after"), "a new run under the old id\n");
    const read = await sdk.readToolOutput({ runId: "v", handle: "res_after" });
    expect(read.rendered).toContain("a new run under the old id");
  });

  it("refuses an upload that outlasts its run's TTL, and stores nothing", async () => {
    const sdk = t.sdk();
    await sdk.offload(key("u", "first"), "keeps the run\n");
    await sdk.setRunTtl("u", 2);
    async function* slow(): AsyncGenerator<Uint8Array> {
      yield new TextEncoder().encode("a line of a long upload\n".repeat(1_000));
      // The run expires while the upload is still being sent, after the server began it.
      await new Promise((resolve) => setTimeout(resolve, 300));
      clock += 3_000;
      yield new TextEncoder().encode("the end\n");
    }
    // It was acknowledged, its expire_time already past, and refused to every read.
    expect(await codeOf(sdk.offload(key("u", "long"), slow()))).toBe(Code.FailedPrecondition);
    expect(await codeOf(sdk.stat("u", "res_long"))).toBe(Code.PermissionDenied);
  });

  it("answers a replay with the run's expiry, as the first answer did", async () => {
    const sdk = t.sdk();
    await sdk.offload(key("s", "first"), "keeps the run\n");
    await sdk.setRunTtl("s", 600);
    for (const [callId, data] of [
      ["small", "a small output\n"],
      ["large", "a line of a larger output\n".repeat(3_000)],
    ] as const) {
      const first = await sdk.offloadResult(key("s", callId), data);
      const again = await sdk.offloadResult(key("s", callId), data);
      expect(first.created).toBe(true);
      expect(again.created).toBe(false);
      // A replay said "never expires": expire_time unset.
      expect(first.attachment.expireTime).toBeDefined();
      expect(again.attachment.expireTime).toEqual(first.attachment.expireTime);
    }
  });

  it("keeps an output offloaded again under an expired key after the sweep read the old one", async () => {
    const sdk = t.sdk();
    await sdk.offload(key("z", "keep"), "keeps the run live\n");
    await sdk.offload(key("z", "c"), "expires\n", { ttl: { seconds: 1n, nanos: 0 } });
    clock += 2_000;
    // The sweep has read res_c, expired; an offload of the same key replaces it before the
    // sweep deletes by key, which took the acknowledged one with it.
    const read = gates.afterRead("/r/z/h/res_c");
    const swept = sweep();
    await read.reached;
    const again = await sdk.offloadResult(key("z", "c"), "offloaded again, no TTL\n");
    expect(again.created).toBe(true);
    read.open();
    await swept;
    const window = await sdk.readToolOutput({ runId: "z", handle: "res_c" });
    expect(window.rendered).toContain("offloaded again, no TTL");
  });

  it("does not sweep a run whose expiry was moved on after the sweep read it", async () => {
    const sdk = t.sdk();
    await sdk.offload(key("w", "c1"), "kept\n");
    await sdk.setRunTtl("w", 3);
    clock += 4_000;
    // The sweep has read the run's TTL, expired; a TTL of an hour is written before the sweep
    // deletes the run (as a SetRunTtl sent just before the expiry and slow to land does).
    const read = gates.afterRead("/r/w/ttl");
    const swept = sweep();
    await read.reached;
    await t.backend.delete("t/dev/r/w/ttl");
    await t.backend.put(
      "t/dev/r/w/ttl",
      bytesBody(
        new TextEncoder().encode(
          JSON.stringify({ expiresMs: clock + 3_600_000, tenant: "dev", runId: "w" }),
        ),
      ),
    );
    read.open();
    expect((await swept)?.expiredRuns).toBe(0);
    const window = await sdk.readToolOutput({ runId: "w", handle: "res_c1" });
    expect(window.rendered).toContain("kept");
  });

  it("never brings back a run a read found expired while SetRunTtl replaced its TTL", async () => {
    const sdk = t.sdk();
    await sdk.offload(key("e", "out"), "kept until the run expires\n");
    await sdk.setRunTtl("e", 10);
    // The extension found the run live; it waits to remove the old TTL while the run expires
    // and a read finds it so.
    const replace = gates.atDelete(runTtlKey("dev", "e"));
    const extend = codeOf(sdk.setRunTtl("e", 3_600));
    await replace.reached;
    clock += 11_000;
    expect(await codeOf(sdk.stat("e", "res_out"))).toBe(Code.PermissionDenied);
    replace.open();
    expect(await extend).toBe(Code.NotFound);
    expect(await codeOf(sdk.stat("e", "res_out"))).toBe(Code.PermissionDenied);
  });

  it("refuses a fork into the id of an expired run the sweep is removing", async () => {
    const sdk = t.sdk();
    await sdk.offload(key("p", "a"), "the parent's output\n");
    await sdk.offload(key("z", "old"), "the expired run's output\n");
    await sdk.setRunTtl("z", 1);
    clock += 2_000;
    // The sweep has removed the expired run's records and waits to remove its TTL, last.
    const last = gates.atDelete(runTtlKey("dev", "z"));
    const swept = sweep();
    await last.reached;
    const fork = await codeOf(sdk.forkRun("p", "z"));
    last.open();
    await swept;
    expect(fork).toBe(Code.FailedPrecondition);
    // Swept, the id is free: a fork into it is a fork, and stays one.
    await sdk.forkRun("p", "z");
    await sweep();
    const runs = (await sdk.raw.listRuns({})).runs.filter((r) => r.runId === "z");
    expect(runs.map((r) => r.parentRunId)).toEqual(["p"]);
  });
});
