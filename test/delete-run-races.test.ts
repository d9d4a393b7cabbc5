import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forkMarkerKey, forkMarkerPrefix, runDeletedKey } from "../server/src/keys.js";
import { codeOf, failureOf } from "./support/code-of.js";
import { storeGates } from "./support/store-gates.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** A payload large enough to be stored as a blob, not inline. */
const payload = "a line of a tool output that is stored as a blob\n".repeat(3_000);

/**
 * gatedServer starts a filesystem server for the calling describe block, its store calls held
 * where the tests say (storeGates), and stops it after the block; `handles` lists a run's.
 */
function gatedServer() {
  const gates = storeGates();
  let t: TestServer | undefined;
  beforeAll(async () => {
    t = await startTestServer({ backend: "filesystem", wrapBackend: gates.wrap });
  });
  afterAll(() => t?.stop());
  const server = (): TestServer => {
    if (t === undefined) throw new Error("the test server has not started");
    return t;
  };
  const handles = async (runId: string) => {
    const out: string[] = [];
    for await (const a of server().sdk().listAll(runId)) out.push(a.handle);
    return out;
  };
  return { gates, server, handles };
}

/**
 * DeleteRun racing an offload into the same run must leave either the whole output or none of
 * it: never an acknowledged record whose bytes the delete removed (listed, stat-able, and
 * unreadable for ever; an identical resend answered `created: false`).
 */
describe("DeleteRun racing an offload", () => {
  const { gates, server, handles } = gatedServer();

  it("fails an offload whose blob the delete removed before its record committed", async () => {
    const commit = gates.at("/r/race-a/h/");
    const offload = codeOf(
      server().sdk().offload({ tenant: "dev", runId: "race-a", callId: "c" }, payload),
    );
    await commit.reached;
    await server().sdk().deleteRun("race-a");
    commit.open();
    expect(await offload).toBe(Code.Aborted);
    expect(await handles("race-a")).toEqual([]);
  });

  it("deletes an output acknowledged while the delete was removing the run's blobs", async () => {
    const commit = gates.at("/r/race-b/h/");
    const offload = codeOf(
      server().sdk().offload({ tenant: "dev", runId: "race-b", callId: "c" }, payload),
    );
    await commit.reached;
    const blobs = gates.at("/r/race-b/b/");
    const deleted = server().sdk().deleteRun("race-b");
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
 * An offload that answers OK must stay readable unless a DeleteRun it overlapped removes it,
 * record and bytes together: also when forks keep the run's bytes past its delete, and when
 * the OK is a replay of a record another offload is withdrawing.
 */
describe("DeleteRun racing an offload, with forks or a replay", () => {
  const { gates, server, handles } = gatedServer();

  it("fails an offload committed after a run forks hold was deleted", async () => {
    await server().sdk().offload({ tenant: "dev", runId: "held-a", callId: "base" }, payload);
    await server().sdk().forkRun("held-a", "held-a-fork");
    const commit = gates.at("/r/held-a/h/");
    const late = codeOf(
      server().sdk().offload({ tenant: "dev", runId: "held-a", callId: "late" }, payload),
    );
    await commit.reached;
    await server().sdk().deleteRun("held-a");
    commit.open();
    expect(await late).toBe(Code.Aborted);
    await server().sdk().deleteRun("held-a-fork");
    expect(await handles("held-a")).toEqual([]);
  });

  it("deletes an output acknowledged before a run forks hold was marked deleted", async () => {
    await server().sdk().offload({ tenant: "dev", runId: "held-b", callId: "base" }, payload);
    await server().sdk().forkRun("held-b", "held-b-fork");
    const mark = gates.at(runDeletedKey("dev", "held-b"));
    const deleted = server().sdk().deleteRun("held-b");
    await mark.reached;
    const late = await codeOf(
      server().sdk().offload({ tenant: "dev", runId: "held-b", callId: "late" }, payload),
    );
    // Acknowledged while the delete ran: it may be deleted with the run, record and bytes.
    expect(late).toBeUndefined();
    mark.open();
    await deleted;
    await server().sdk().deleteRun("held-b-fork");
    // No record was left behind to read DATA_LOSS once the fork took the bytes.
    expect(await handles("held-b")).toEqual([]);
  });

  it("withdraws only its own record, not one committed after a delete took it", async () => {
    const commit = gates.at("/r/race-e/h/");
    const first = codeOf(
      server().sdk().offload({ tenant: "dev", runId: "race-e", callId: "c" }, payload),
    );
    await commit.reached;
    await server().sdk().deleteRun("race-e");
    // The first offload commits, finds its blob gone, and is held as it looks at its record.
    const look = gates.beforeRead("/r/race-e/h/res_c");
    commit.open();
    // An offload that withdraws by handle, unread, never reaches the gate.
    const looked = await Promise.race([look.reached.then(() => true), first.then(() => false)]);
    expect(looked).toBe(true);
    // Meanwhile the run is deleted again (the record with it) and the output sent anew.
    await server().sdk().deleteRun("race-e");
    const again = await codeOf(
      server().sdk().offload({ tenant: "dev", runId: "race-e", callId: "c" }, payload),
    );
    expect(again).toBeUndefined();
    look.open();
    expect(await first).toBe(Code.Aborted);
    expect(await handles("race-e")).toEqual(["res_c"]);
  });

  it("never acknowledges a replay of a record its offload is withdrawing", async () => {
    const commit = gates.at("/r/race-c/h/");
    const first = codeOf(
      server().sdk().offload({ tenant: "dev", runId: "race-c", callId: "c" }, payload),
    );
    await commit.reached;
    await server().sdk().deleteRun("race-c");
    // The first offload commits its record, finds its blob deleted, and stops before removing it.
    const withdraw = gates.atDelete("/r/race-c/h/");
    commit.open();
    await withdraw.reached;
    const again = await codeOf(
      server().sdk().offload({ tenant: "dev", runId: "race-c", callId: "c" }, payload),
    );
    withdraw.open();
    expect(await first).toBe(Code.Aborted);
    expect(again).toBe(Code.Aborted);
    expect(await handles("race-c")).toEqual([]);
  });
});

/**
 * DeleteRun of a parent racing ForkRun of it must leave the child either a copy whose bytes
 * stay (the delete keeps them for the fork) or nothing: never records whose bytes it deleted.
 */
describe("DeleteRun of a parent racing a fork of it", () => {
  const { gates, server } = gatedServer();

  it("never gives the child records whose bytes the delete removed", async () => {
    for (const callId of ["a", "b", "c"]) {
      await server().sdk().offload({ tenant: "dev", runId: "parent", callId }, payload);
    }
    // The fork stops as it refers to the parent's bytes; the delete runs meanwhile.
    const refer = gates.at(forkMarkerPrefix("dev", "parent"));
    const fork = server()
      .sdk()
      .forkRun("parent", "child")
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    await refer.reached;
    await server().sdk().deleteRun("parent");
    refer.open();
    await fork;
    for await (const a of server().sdk().listAll("child")) {
      const read = await codeOf(
        server()
          .sdk()
          .readToolOutput({
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
      await server().sdk().offload({ tenant: "dev", runId: "parent2", callId }, payload);
    }
    // The fork stops as it writes the child's records, after reading the parent's.
    const copy = gates.at("/r/child2/h/");
    const fork = codeOf(server().sdk().forkRun("parent2", "child2"));
    await copy.reached;
    await server().sdk().deleteRun("parent2");
    copy.open();
    expect(await fork).toBe(Code.Aborted);
    const listed: string[] = [];
    for await (const a of server().sdk().listAll("child2")) listed.push(a.handle);
    expect(listed).toEqual([]);
  });
});

/**
 * A store that cannot find where an offload writes (the filesystem's run directory pruned by a
 * DeleteRun again and again) is a race with that delete, answered ABORTED as the others are;
 * the store's own message, which names its keys, is not the client's.
 */
describe("an offload whose store write meets NOT_FOUND", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      backend: "filesystem",
      wrapBackend: (base) => ({
        ...base,
        put: async (key, body, opts) => {
          if (key.includes("/r/pruned/b/")) {
            throw new ConnectError(`not found (key "${key}") [open: ENOENT]`, Code.NotFound);
          }
          return base.put(key, body, opts);
        },
      }),
    });
  });
  afterAll(() => t.stop());

  it("answers ABORTED without naming the store's keys", async () => {
    const err = await failureOf(
      t.sdk().offload({ tenant: "dev", runId: "pruned", callId: "c" }, payload),
    );
    expect(err.code).toBe(Code.Aborted);
    expect(err.rawMessage).toContain("send it again");
    expect(err.rawMessage).not.toContain("t/dev/");
    const listed: string[] = [];
    for await (const a of t.sdk().listAll("pruned")) listed.push(a.handle);
    expect(listed).toEqual([]);
  });
});

/**
 * ForkRun racing an Offload into the child it creates: a child is either the parent's copy or
 * the run the offloads made, never a copy missing the handles an offload took first.
 */
describe("ForkRun racing an offload into its child", () => {
  const { gates, server } = gatedServer();

  it("fails the fork ALREADY_EXISTS and keeps the offload when it took a parent's handle", async () => {
    const sdk = server().sdk();
    for (const callId of ["a", "b", "c"]) {
      await sdk.offload({ tenant: "dev", runId: "fp", callId }, `${callId}\n${payload}`);
    }
    // The fork stops as it writes the child's copies; an offload into the child lands first.
    const copy = gates.at("/r/fc/h/");
    const fork = failureOf(sdk.forkRun("fp", "fc", { ttlSeconds: 3600 }));
    await copy.reached;
    await sdk.offload({ tenant: "dev", runId: "fc", callId: "b" }, "the child's own b\n");
    copy.open();
    const err = await fork;
    expect(err.code).toBe(Code.AlreadyExists);
    expect(err.rawMessage).toContain('"res_b" was offloaded into it while it was being forked');
    const listed: string[] = [];
    for await (const a of sdk.listAll("fc")) listed.push(a.handle);
    expect(listed).toEqual(["res_b"]);
    const read = await sdk.readToolOutput({ runId: "fc", handle: "res_b" });
    expect(read.rendered).toContain("the child's own b");
    // No fork is left: the child has no parent or TTL, and the parent's bytes are its own.
    const runs = (await sdk.raw.listRuns({})).runs.filter((r) => r.runId === "fc");
    expect(runs.map((r) => [r.parentRunId, r.expireTime])).toEqual([["", undefined]]);
    await sdk.deleteRun("fp");
    expect(await codeOf(sdk.offload({ tenant: "dev", runId: "fp", callId: "z" }, payload))).toBe(
      undefined,
    );
  });

  it("takes back only its own copies: not an output offloaded after a delete of the child", async () => {
    const sdk = server().sdk();
    await sdk.offload({ tenant: "dev", runId: "fp3", callId: "a" }, `a\n${payload}`);
    const copy = gates.at("/r/fc3/h/");
    const fork = codeOf(sdk.forkRun("fp3", "fc3"));
    await copy.reached;
    // The fork will fail (its parent deleted while it copies) and then look at its copy of
    // res_a, to take it back: held there, after a DeleteRun of the child removed the copy and
    // an offload committed its own res_a, acknowledged.
    await sdk.deleteRun("fp3");
    const takeBack = gates.beforeRead("/r/fc3/h/res_a");
    copy.open();
    // A fork that takes its copies back by handle, unread, never reaches the gate.
    const looked = await Promise.race([takeBack.reached.then(() => true), fork.then(() => false)]);
    expect(looked).toBe(true);
    await sdk.deleteRun("fc3");
    await sdk.offload({ tenant: "dev", runId: "fc3", callId: "a" }, "the child's own a\n");
    takeBack.open();
    expect(await fork).toBe(Code.Aborted);
    const read = await sdk.readToolOutput({ runId: "fc3", handle: "res_a" });
    expect(read.rendered).toContain("the child's own a");
  });

  it("keeps an offload into the child when the fork fails for its parent's delete", async () => {
    const sdk = server().sdk();
    for (const callId of ["a", "b"]) {
      await sdk.offload({ tenant: "dev", runId: "fp2", callId }, `${callId}\n${payload}`);
    }
    const copy = gates.at("/r/fc2/h/");
    const fork = codeOf(sdk.forkRun("fp2", "fc2"));
    await copy.reached;
    await sdk.offload({ tenant: "dev", runId: "fc2", callId: "own" }, "the child's own\n");
    await sdk.deleteRun("fp2");
    copy.open();
    expect(await fork).toBe(Code.Aborted);
    // The fork took back its copies; the output acknowledged in the child is still there.
    const listed: string[] = [];
    for await (const a of sdk.listAll("fc2")) listed.push(a.handle);
    expect(listed).toEqual(["res_own"]);
    const read = await sdk.readToolOutput({ runId: "fc2", handle: "res_own" });
    expect(read.rendered).toContain("the child's own");
  });
});

/**
 * MergeRun racing DeleteRun of its parent or its child: the merge commits into a parent that is
 * still there and from a child that is still there, or answers why not; never outputs in a
 * deleted parent, nor "merged 0" for a child that went.
 */
describe("MergeRun racing a DeleteRun", () => {
  const { gates, server, handles } = gatedServer();

  it("fails a merge whose parent a DeleteRun removed while it wrote", async () => {
    const sdk = server().sdk();
    await sdk.offload({ tenant: "dev", runId: "mp", callId: "a" }, payload);
    await sdk.forkRun("mp", "mc");
    await sdk.offload({ tenant: "dev", runId: "mc", callId: "k" }, `k\n${payload}`);
    // The merge stops as it writes its records into the parent; the parent is deleted.
    const write = gates.at("/r/mp/h/");
    const merge = failureOf(sdk.mergeRun("mc", "mp"));
    await write.reached;
    await sdk.deleteRun("mp");
    write.open();
    const err = await merge;
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toContain('run "mp" was deleted during the merge');
    expect(await handles("mp")).toEqual([]);
    // The child is whole, and deleting it leaves nothing that reads DATA_LOSS.
    expect((await sdk.readToolOutput({ runId: "mc", handle: "res_k" })).rendered).toContain("k");
    await sdk.deleteRun("mc");
    expect(await handles("mp")).toEqual([]);
  });

  it("takes back only its own records when it aborts after a delete of the parent", async () => {
    const sdk = server().sdk();
    // A small output: stored inline, so the fork keeps none of the parent's bytes and the
    // parent's id is free once deleted.
    await sdk.offload({ tenant: "dev", runId: "mp3", callId: "a" }, "parent a\n");
    await sdk.forkRun("mp3", "mc3");
    await sdk.offload({ tenant: "dev", runId: "mc3", callId: "k1" }, `k1\n${payload}`);
    // The parent is deleted while the merge writes res_k1 into it: the merge aborts, and is
    // held as it records that while the id's new run gets its own res_k1.
    const write = gates.at("/r/mp3/h/");
    const merge = codeOf(sdk.mergeRun("mc3", "mp3"));
    await write.reached;
    await sdk.deleteRun("mp3");
    const decide = gates.at("/r/mp3/m/o/");
    write.open();
    await decide.reached;
    await sdk.deleteRun("mp3");
    await sdk.offload({ tenant: "dev", runId: "mp3", callId: "k1" }, "the new run's k1\n");
    decide.open();
    expect(await merge).toBe(Code.FailedPrecondition);
    const read = await sdk.readToolOutput({ runId: "mp3", handle: "res_k1" });
    expect(read.rendered).toContain("the new run's k1");
  });

  it("answers NOT_FOUND for a child a DeleteRun removed while the merge listed it", async () => {
    const sdk = server().sdk();
    await sdk.offload({ tenant: "dev", runId: "mp2", callId: "a" }, payload);
    await sdk.forkRun("mp2", "mc2");
    await sdk.offload({ tenant: "dev", runId: "mc2", callId: "k" }, `k\n${payload}`);
    const listed = gates.beforeRead("/r/mc2/h/res_k");
    const merge = codeOf(sdk.mergeRun("mc2", "mp2"));
    await listed.reached;
    await sdk.deleteRun("mc2");
    listed.open();
    expect(await merge).toBe(Code.NotFound);
    expect(await handles("mp2")).toEqual(["res_a"]);
  });
});

/**
 * ForkRun racing a DeleteRun of the child it creates: copies whose references the delete
 * dropped must not stay, or they read DATA_LOSS once the parent's bytes go.
 */
describe("ForkRun racing a DeleteRun of its child", () => {
  const { gates, server, handles } = gatedServer();

  it("fails the fork when its copies land after the delete dropped its references", async () => {
    const sdk = server().sdk();
    await sdk.offload({ tenant: "dev", runId: "dp", callId: "a" }, payload);
    const copy = gates.at("/r/dc/h/");
    const fork = codeOf(sdk.forkRun("dp", "dc"));
    await copy.reached;
    await sdk.deleteRun("dc");
    copy.open();
    expect(await fork).toBe(Code.Aborted);
    expect(await handles("dc")).toEqual([]);
    await sdk.deleteRun("dp");
    expect(await codeOf(sdk.readToolOutput({ runId: "dc", handle: "res_a" }))).toBe(
      Code.PermissionDenied,
    );
  });

  it("has the delete take copies committed before it dropped the references", async () => {
    const sdk = server().sdk();
    await sdk.offload({ tenant: "dev", runId: "dp2", callId: "a" }, payload);
    const copy = gates.at("/r/dc2/h/");
    const fork = codeOf(sdk.forkRun("dp2", "dc2"));
    await copy.reached;
    // The delete stops as it drops the parent's marker for the child; the fork copies then.
    const drop = gates.atDelete(forkMarkerKey("dev", "dp2", "dc2"));
    const deleted = sdk.deleteRun("dc2");
    await drop.reached;
    copy.open();
    expect(await fork).toBeUndefined();
    drop.open();
    await deleted;
    expect(await handles("dc2")).toEqual([]);
    await sdk.deleteRun("dp2");
    expect(await codeOf(sdk.readToolOutput({ runId: "dc2", handle: "res_a" }))).toBe(
      Code.PermissionDenied,
    );
  });
});
