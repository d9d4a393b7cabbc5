import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forkMarkerPrefix } from "../server/src/keys.js";
import { codeOf } from "./support/code-of.js";
import { storeGates } from "./support/store-gates.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/**
 * DeleteRun racing an offload into the same run must leave either the whole output or none of
 * it: never an acknowledged record whose bytes the delete removed (listed, stat-able, and
 * unreadable for ever; an identical resend answered `created: false`).
 */
describe("DeleteRun racing an offload", () => {
  const payload = "a line of a tool output that is stored as a blob\n".repeat(3_000);
  let t: TestServer;
  const gates = storeGates();
  beforeAll(async () => {
    t = await startTestServer({ backend: "filesystem", wrapBackend: gates.wrap });
  });
  afterAll(() => t.stop());

  const handles = async (runId: string) => {
    const out: string[] = [];
    for await (const a of t.sdk().listAll(runId)) out.push(a.handle);
    return out;
  };

  it("fails an offload whose blob the delete removed before its record committed", async () => {
    const commit = gates.at("/r/race-a/h/");
    const offload = codeOf(
      t.sdk().offload({ tenant: "dev", runId: "race-a", callId: "c" }, payload),
    );
    await commit.reached;
    await t.sdk().deleteRun("race-a");
    commit.open();
    expect(await offload).toBe(Code.Aborted);
    expect(await handles("race-a")).toEqual([]);
  });

  it("deletes an output acknowledged while the delete was removing the run's blobs", async () => {
    const commit = gates.at("/r/race-b/h/");
    const offload = codeOf(
      t.sdk().offload({ tenant: "dev", runId: "race-b", callId: "c" }, payload),
    );
    await commit.reached;
    const blobs = gates.at("/r/race-b/b/");
    const deleted = t.sdk().deleteRun("race-b");
    await blobs.reached;
    commit.open();
    // Acknowledged: its blob was still there when its record committed.
    expect(await offload).toBeUndefined();
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
  const gates = storeGates();
  beforeAll(async () => {
    t = await startTestServer({ backend: "filesystem", wrapBackend: gates.wrap });
  });
  afterAll(() => t.stop());

  it("never gives the child records whose bytes the delete removed", async () => {
    for (const callId of ["a", "b", "c"]) {
      await t.sdk().offload({ tenant: "dev", runId: "parent", callId }, payload);
    }
    // The fork stops as it refers to the parent's bytes; the delete runs meanwhile.
    const refer = gates.at(forkMarkerPrefix("dev", "parent"));
    const fork = t
      .sdk()
      .forkRun("parent", "child")
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    await refer.reached;
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
    const copy = gates.at("/r/child2/h/");
    const fork = codeOf(t.sdk().forkRun("parent2", "child2"));
    await copy.reached;
    await t.sdk().deleteRun("parent2");
    copy.open();
    expect(await fork).toBe(Code.Aborted);
    const listed: string[] = [];
    for await (const a of t.sdk().listAll("child2")) listed.push(a.handle);
    expect(listed).toEqual([]);
  });
});
