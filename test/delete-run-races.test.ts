import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import { forkMarkerPrefix } from "../server/src/keys.js";
import { codeOf } from "./support/code-of.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** A gate a wrapped store call waits at: `reached` resolves when a call arrives. */
function gate() {
  let open: () => void = () => undefined;
  let arrived: () => void = () => undefined;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  const reached = new Promise<void>((r) => {
    arrived = r;
  });
  return {
    reached,
    open,
    async pass() {
      arrived();
      await opened;
    },
  };
}

/**
 * DeleteRun racing an offload into the same run must leave either the whole output or none of
 * it: never an acknowledged record whose bytes the delete removed (listed, stat-able, and
 * unreadable for ever; an identical resend answered `created: false`).
 */
describe("DeleteRun racing an offload", () => {
  const payload = "a line of a tool output that is stored as a blob\n".repeat(3_000);
  let t: TestServer;
  // Which store calls to hold, by a part of their keys.
  const held = new Map<string, ReturnType<typeof gate>>();
  const hold = async (keys: readonly string[]) => {
    for (const [part, g] of held) if (keys.some((k) => k.includes(part))) await g.pass();
  };
  const wrap = (base: Backend): Backend => ({
    ...base,
    put: async (key, body, opts) => {
      await hold([key]);
      return base.put(key, body, opts);
    },
    ...(base.putMany === undefined
      ? {}
      : {
          putMany: async (keys, body, opts) => {
            await hold(keys);
            return base.putMany?.(keys, body, opts) ?? [];
          },
        }),
    deleteMany: async (keys, opts) => {
      await hold(keys);
      return base.deleteMany(keys, opts);
    },
  });
  beforeAll(async () => {
    t = await startTestServer({ backend: "filesystem", wrapBackend: wrap });
  });
  afterAll(() => t.stop());

  const handles = async (runId: string) => {
    const out: string[] = [];
    for await (const a of t.sdk().listAll(runId)) out.push(a.handle);
    return out;
  };

  it("fails an offload whose blob the delete removed before its record committed", async () => {
    const commit = gate();
    held.set("/r/race-a/h/", commit);
    const offload = codeOf(
      t.sdk().offload({ tenant: "dev", runId: "race-a", callId: "c" }, payload),
    );
    await commit.reached;
    held.delete("/r/race-a/h/");
    await t.sdk().deleteRun("race-a");
    commit.open();
    expect(await offload).toBe(Code.Aborted);
    expect(await handles("race-a")).toEqual([]);
  });

  it("deletes an output acknowledged while the delete was removing the run's blobs", async () => {
    const commit = gate();
    const blobs = gate();
    held.set("/r/race-b/h/", commit);
    const offload = codeOf(
      t.sdk().offload({ tenant: "dev", runId: "race-b", callId: "c" }, payload),
    );
    await commit.reached;
    held.delete("/r/race-b/h/");
    held.set("/r/race-b/b/", blobs);
    const deleted = t.sdk().deleteRun("race-b");
    await blobs.reached;
    commit.open();
    // Acknowledged: its blob was still there when its record committed.
    expect(await offload).toBeUndefined();
    held.delete("/r/race-b/b/");
    blobs.open();
    await deleted;
    // The delete saw the record once the blobs were gone: nothing dangles.
    expect(await handles("race-b")).toEqual([]);
  });
});

/**
 * DeleteRun of a parent racing ForkRun of it must leave the child either a copy whose bytes
 * stay (the delete keeps them for the fork) or nothing: never records whose bytes it deleted.
 */
describe("DeleteRun of a parent racing a fork of it", () => {
  const payload = "a line of a tool output that is stored as a blob\n".repeat(3_000);
  let t: TestServer;
  const held = new Map<string, ReturnType<typeof gate>>();
  const hold = async (keys: readonly string[]) => {
    for (const [part, g] of held) if (keys.some((k) => k.includes(part))) await g.pass();
  };
  beforeAll(async () => {
    t = await startTestServer({
      backend: "filesystem",
      wrapBackend: (base) => ({
        ...base,
        put: async (key, body, opts) => {
          await hold([key]);
          return base.put(key, body, opts);
        },
        ...(base.putMany === undefined
          ? {}
          : {
              putMany: async (keys, body, opts) => {
                await hold(keys);
                return base.putMany?.(keys, body, opts) ?? [];
              },
            }),
      }),
    });
  });
  afterAll(() => t.stop());

  it("never gives the child records whose bytes the delete removed", async () => {
    for (const callId of ["a", "b", "c"]) {
      await t.sdk().offload({ tenant: "dev", runId: "parent", callId }, payload);
    }
    // The fork stops as it refers to the parent's bytes; the delete runs meanwhile.
    const refer = gate();
    held.set(forkMarkerPrefix("dev", "parent"), refer);
    const fork = t
      .sdk()
      .forkRun("parent", "child")
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    await refer.reached;
    held.clear();
    await t.sdk().deleteRun("parent");
    refer.open();
    await fork;
    for await (const a of t.sdk().listAll("child")) {
      const read = await codeOf(
        t.sdk().readToolOutput({
          runId: "child",
          handle: a.handle,
          window: { case: "bytes", value: {} },
        }),
      );
      expect(read, a.handle).toBeUndefined();
    }
  });

  it("fails a fork whose parent was deleted while it copied, leaving no child", async () => {
    for (const callId of ["a", "b", "c"]) {
      await t.sdk().offload({ tenant: "dev", runId: "parent2", callId }, payload);
    }
    // The fork stops as it writes the child's records, after reading the parent's.
    const copy = gate();
    held.set("/r/child2/h/", copy);
    const fork = codeOf(t.sdk().forkRun("parent2", "child2"));
    await copy.reached;
    held.clear();
    await t.sdk().deleteRun("parent2");
    copy.open();
    expect(await fork).toBe(Code.Aborted);
    const listed: string[] = [];
    for await (const a of t.sdk().listAll("child2")) listed.push(a.handle);
    expect(listed).toEqual([]);
  });
});
