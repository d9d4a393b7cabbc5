import { symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import type { RunInfo } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { bytesBody } from "../server/src/backends/body.js";
import type { FilesystemBackend } from "../server/src/backends/filesystem.js";
import { createSweeper } from "../server/src/sweeper.js";
import { codeOf, failureOf } from "./support/code-of.js";
import { listenerWarningsOf } from "./support/listener-warnings.js";
import { serviceBackends, startTestServer, type TestServer } from "./support/test-server.js";

/** Every key the backend holds, whatever the backend. */
async function storedFiles(t: TestServer): Promise<string[]> {
  const keys: string[] = [];
  for (;;) {
    const after = keys.at(-1);
    const page = await t.backend.list("t/", after === undefined ? {} : { startAfter: after });
    keys.push(...page.keys);
    if (!page.truncated) return keys;
  }
}

const big = (label: string) => `${label}\n${"payload line\n".repeat(5000)}`;

describe.each(serviceBackends)("runs: delete, fork, TTL  (%s)", (backendKind) => {
  let t: TestServer;
  let clock = Date.now();
  afterEach(() => t.stop());

  it("DeleteRun removes the registry and the bytes", async () => {
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "gone", callId: "c1" }, big("one"));
    await sdk.offload({ tenant: "dev", runId: "gone", callId: "c2" }, "small\n");
    await sdk.offload({ tenant: "dev", runId: "kept", callId: "c1" }, big("kept"));
    const res = await sdk.raw.deleteRun({ runId: "gone" });
    expect(res.deletedAttachments).toBe(2n);
    expect(await codeOf(sdk.readToolOutput({ runId: "gone", handle: "res_c1" }))).toBe(
      Code.PermissionDenied,
    );
    const files = await storedFiles(t);
    expect(files.filter((f) => f.includes("/gone/"))).toEqual([]);
    expect(files.some((f) => f.includes("/kept/"))).toBe(true);
    expect((await sdk.raw.listToolOutputs({ runId: "gone" })).attachments).toEqual([]);
  });

  it("ForkRun shares the parent's handles without copying bytes, one way only", async () => {
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "parent", callId: "p1" }, big("from parent"));
    const before = (await storedFiles(t)).length;
    const fork = await sdk.raw.forkRun({ parentRunId: "parent", childRunId: "child" });
    expect(fork.forkedAttachments).toBe(1n);
    const blobsAfter = (await storedFiles(t)).filter((f) => f.includes("/b/"));
    expect(blobsAfter.filter((f) => f.includes("/child/"))).toEqual([]);
    // The child's meta and record, the parent's marker and the child's owner reference.
    expect((await storedFiles(t)).length).toBeLessThan(before + 5);

    const read = await sdk.readToolOutput({ runId: "child", handle: "res_p1" });
    expect(read.rendered).toContain("from parent");

    await sdk.offload({ tenant: "dev", runId: "child", callId: "c1" }, "child only\n");
    await sdk.offload({ tenant: "dev", runId: "parent", callId: "p2" }, "after fork\n");
    expect(await codeOf(sdk.readToolOutput({ runId: "parent", handle: "res_c1" }))).toBe(
      Code.PermissionDenied,
    );
    expect(await codeOf(sdk.readToolOutput({ runId: "child", handle: "res_p2" }))).toBe(
      Code.PermissionDenied,
    );
    expect(await codeOf(sdk.raw.forkRun({ parentRunId: "parent", childRunId: "child" }))).toBe(
      Code.AlreadyExists,
    );

    // Deleting the parent keeps the bytes the child still refers to...
    await sdk.raw.deleteRun({ runId: "parent" });
    expect((await sdk.readToolOutput({ runId: "child", handle: "res_p1" })).rendered).toContain(
      "from parent",
    );
    // ...and deleting the child then releases them.
    await sdk.raw.deleteRun({ runId: "child" });
    expect((await storedFiles(t)).filter((f) => f.includes("/b/"))).toEqual([]);
  });

  it("expired outputs and runs are invisible at once and swept later", async () => {
    clock = Date.now();
    t = await startTestServer({ backend: backendKind, now: () => clock });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "r", callId: "short" }, big("short-lived"), {
      ttl: { seconds: 60n, nanos: 0 },
    });
    await sdk.offload({ tenant: "dev", runId: "r", callId: "long" }, "long-lived\n");
    await sdk.offload({ tenant: "dev", runId: "temp", callId: "x" }, big("temp run"));
    await sdk.raw.setRunTtl({ runId: "temp", ttl: { seconds: 120n, nanos: 0 } });
    const stat = await sdk.raw.statToolOutput({ runId: "r", handle: "res_short" });
    const expires = stat.attachment?.expireTime;
    expect(Number(expires?.seconds) * 1000 + Math.floor((expires?.nanos ?? 0) / 1e6)).toBe(
      Number(stat.attachment?.createTime?.seconds) * 1000 +
        Math.floor((stat.attachment?.createTime?.nanos ?? 0) / 1e6) +
        60_000,
    );

    clock += 61_000;
    expect(await codeOf(sdk.readToolOutput({ runId: "r", handle: "res_short" }))).toBe(
      Code.PermissionDenied,
    );
    expect((await sdk.readToolOutput({ runId: "r", handle: "res_long" })).rendered).toContain(
      "long-lived",
    );
    const listed = await sdk.raw.listToolOutputs({ runId: "r" });
    expect(listed.attachments.map((a) => a.handle)).toEqual(["res_long"]);
    expect((await sdk.readToolOutput({ runId: "temp", handle: "res_x" })).rendered).toContain(
      "temp run",
    );

    clock += 60_000;
    expect(await codeOf(sdk.readToolOutput({ runId: "temp", handle: "res_x" }))).toBe(
      Code.PermissionDenied,
    );

    const sweeper = createSweeper(t.server.core, { intervalMs: 60_000, orphanAgeMs: 3_600_000 });
    const report = await sweeper.sweepOnce();
    expect(report).toMatchObject({ expiredRuns: 1, expiredRecords: 1 });
    const files = await storedFiles(t);
    expect(files.filter((f) => f.includes("/temp/"))).toEqual([]);
    expect(files.filter((f) => f.includes("short"))).toEqual([]);
    expect((await sdk.readToolOutput({ runId: "r", handle: "res_long" })).rendered).toContain(
      "long-lived",
    );
  });

  // With a run limit the record is looked up before streaming; without one, at the commit.
  it.each([
    ["without a run limit", {}],
    ["with a run limit", { maxRunBytes: 10_000_000 }],
  ])(
    "lets a new offload take the handle of an expired output, small or streamed, %s",
    async (_, limits) => {
      clock = Date.now();
      t = await startTestServer({ backend: backendKind, now: () => clock, limits });
      const sdk = t.sdk();
      const ttl = { ttl: { seconds: 60n, nanos: 0 } };
      await sdk.offload({ tenant: "dev", runId: "r", callId: "small" }, "old small\n", ttl);
      await sdk.offload({ tenant: "dev", runId: "r", callId: "big" }, big("old big"), ttl);
      // Before expiry the handles are taken: other bytes are refused, the same bytes replay.
      expect(
        await codeOf(sdk.offload({ tenant: "dev", runId: "r", callId: "small" }, "other\n")),
      ).toBe(Code.AlreadyExists);
      const replayed = await sdk.offloadResult(
        { tenant: "dev", runId: "r", callId: "big" },
        big("old big"),
        ttl,
      );
      expect(replayed.created).toBe(false);

      clock += 61_000;
      const small = await sdk.offloadResult(
        { tenant: "dev", runId: "r", callId: "small" },
        "new small\n",
      );
      const streamed = await sdk.offloadResult(
        { tenant: "dev", runId: "r", callId: "big" },
        big("new big"),
      );
      expect([small.created, streamed.created]).toEqual([true, true]);
      expect((await sdk.readToolOutput({ runId: "r", handle: "res_small" })).rendered).toContain(
        "new small",
      );
      expect((await sdk.readToolOutput({ runId: "r", handle: "res_big" })).rendered).toContain(
        "new big",
      );
    },
  );

  it("SetRunTtl answers NOT_FOUND for a run that never existed, expired, was swept or deleted", async () => {
    clock = Date.now();
    t = await startTestServer({ backend: backendKind, now: () => clock });
    const sdk = t.sdk();
    const setTtl = (runId: string, seconds: bigint) =>
      sdk.raw.setRunTtl({ runId, ttl: { seconds, nanos: 0 } });

    expect(await codeOf(setTtl("ghost", 60n))).toBe(Code.NotFound);
    expect((await storedFiles(t)).filter((f) => f.includes("/ghost/"))).toEqual([]);

    await sdk.offload({ tenant: "dev", runId: "live", callId: "x" }, big("live"));
    const set = await setTtl("live", 60n);
    expect(Number(set.expireTime?.seconds) * 1000).toBe(Math.floor((clock + 60_000) / 1000) * 1000);
    // Forked children exist before they hold a record of their own, even from an empty parent.
    await sdk.raw.forkRun({ parentRunId: "live", childRunId: "child" });
    await sdk.raw.forkRun({ parentRunId: "nothing-yet", childRunId: "empty-child" });
    expect(await codeOf(setTtl("child", 600n))).toBeUndefined();
    expect(await codeOf(setTtl("empty-child", 600n))).toBeUndefined();

    clock += 61_000;
    expect(await codeOf(setTtl("live", 3600n))).toBe(Code.NotFound);
    const report = await createSweeper(t.server.core, {
      intervalMs: 60_000,
      orphanAgeMs: 3_600_000,
    }).sweepOnce();
    expect(report?.expiredRuns).toBe(1);
    // Swept: only the bytes the fork still refers to are left (with the fork's marker and the
    // deletion mark), and SetRunTtl must not plant a new expiry beside them.
    expect(await codeOf(setTtl("live", 3600n))).toBe(Code.NotFound);
    const left = (await storedFiles(t)).filter((f) => f.includes("/live/"));
    expect(left.filter((f) => !/\/live\/(b\/|f\/|deleted$)/.test(f))).toEqual([]);
    expect((await sdk.raw.listToolOutputs({ runId: "live" })).attachments).toEqual([]);

    await sdk.offload({ tenant: "dev", runId: "gone", callId: "x" }, "bye\n");
    await sdk.raw.deleteRun({ runId: "gone" });
    expect(await codeOf(setTtl("gone", 60n))).toBe(Code.NotFound);
    // The fork still reads what it was given.
    expect((await sdk.readToolOutput({ runId: "child", handle: "res_x" })).rendered).toContain(
      "live",
    );
  });

  it("refuses to commit into a run that expired and answers again once it is swept", async () => {
    clock = Date.now();
    t = await startTestServer({ backend: backendKind, now: () => clock });
    const sdk = t.sdk();
    const key = (callId: string) => ({ tenant: "dev", runId: "lapsed", callId });
    await sdk.offload(key("before"), "kept until the run expires\n");
    await sdk.raw.setRunTtl({ runId: "lapsed", ttl: { seconds: 60n, nanos: 0 } });
    clock += 61_000;

    // Committing now would answer with a handle that every read refuses, until the sweep
    // removes the output: the caller must hear that nothing was kept.
    const err = await failureOf(sdk.offload(key("after"), "written after expiry\n"));
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toMatch(/run "lapsed" has expired/);
    const batch = await sdk.raw.offloadBatch({
      items: [{ header: { key: key("batched") }, data: new TextEncoder().encode("batched\n") }],
    });
    expect(batch.results[0]?.result).toMatchObject({
      case: "error",
      value: { code: Code.FailedPrecondition },
    });
    const replay = await failureOf(sdk.offload(key("before"), "kept until the run expires\n"));
    expect(replay.code).toBe(Code.FailedPrecondition);

    await createSweeper(t.server.core, { intervalMs: 60_000, orphanAgeMs: 3_600_000 }).sweepOnce();
    // Swept, the run id is free again: a new run starts under it.
    await sdk.offload(key("after"), "written after the sweep\n");
    expect((await sdk.readToolOutput({ runId: "lapsed", handle: "res_after" })).rendered).toContain(
      "written after the sweep",
    );
    const listed = await sdk.raw.listToolOutputs({ runId: "lapsed" });
    expect(listed.attachments.map((a) => a.handle)).toEqual(["res_after"]);
  });

  it("sweeps blobs that no record refers to once they are old", async () => {
    clock = Date.now();
    t = await startTestServer({ backend: backendKind, now: () => clock });
    await t.sdk().offload({ tenant: "dev", runId: "r", callId: "live" }, big("live"));
    const { bytesBody } = await import("../server/src/backends/body.js");
    await t.backend.put("t/dev/r/r/b/orphan/upload1", bytesBody(Buffer.from("crash leftover")));
    const sweeper = createSweeper(t.server.core, { intervalMs: 60_000, orphanAgeMs: 1000 });
    expect((await sweeper.sweepOnce())?.orphanBlobs).toBe(0);
    clock += 5000;
    expect((await sweeper.sweepOnce())?.orphanBlobs).toBe(1);
    expect((await t.sdk().readToolOutput({ runId: "r", handle: "res_live" })).rendered).toContain(
      "live",
    );
  });

  it("pages through a run's outputs", async () => {
    t = await startTestServer({ backend: "memory" });
    const sdk = t.sdk();
    for (let i = 0; i < 25; i++) {
      await sdk.offload(
        { tenant: "dev", runId: "many", callId: `c${String(i).padStart(2, "0")}` },
        `${i}\n`,
      );
    }
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await sdk.raw.listToolOutputs({ runId: "many", pageSize: 10, pageToken });
      expect(page.attachments.length).toBeLessThanOrEqual(10);
      seen.push(...page.attachments.map((a) => a.handle));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    expect(seen).toHaveLength(25);
    expect(new Set(seen).size).toBe(25);
    expect(await codeOf(sdk.raw.listToolOutputs({ runId: "many", pageToken: "garbage!" }))).toBe(
      Code.InvalidArgument,
    );
  });

  it("takes a page token only on the run and tenant it was issued for", async () => {
    t = await startTestServer({ backend: "memory", tokens: { "tok-a": "ta", "tok-b": "tb" } });
    const [a, b] = [t.raw("tok-a"), t.raw("tok-b")];
    for (const [client, tenant, runId] of [
      [t.sdk("tok-a"), "ta", "r1"],
      [t.sdk("tok-a"), "ta", "r2"],
      [t.sdk("tok-b"), "tb", "r1"],
    ] as const) {
      for (let i = 0; i < 5; i++) {
        await client.offload({ tenant, runId, callId: `c${i}` }, `${tenant} ${runId} ${i}\n`);
      }
    }
    const first = await a.listToolOutputs({ runId: "r1", pageSize: 2 });
    const token = first.nextPageToken;
    expect(token).not.toBe("");

    const refused = async (call: Promise<unknown>) => {
      const err = await failureOf(call);
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toMatch(/^page_token: /);
    };
    // Another run of the same tenant, the same run name in another tenant.
    await refused(a.listToolOutputs({ runId: "r2", pageSize: 2, pageToken: token }));
    await refused(b.listToolOutputs({ runId: "r1", pageSize: 2, pageToken: token }));
    // An edited cursor (it would skip ahead) with the digest left as it was.
    const decoded = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
    const edited = Buffer.from(JSON.stringify({ ...decoded, a: `${decoded.a}x` })).toString(
      "base64url",
    );
    await refused(a.listToolOutputs({ runId: "r1", pageSize: 2, pageToken: edited }));

    // The run's own token still pages through every record once.
    const seen = first.attachments.map((x) => x.handle);
    let pageToken = token;
    while (pageToken !== "") {
      const page = await a.listToolOutputs({ runId: "r1", pageSize: 2, pageToken });
      seen.push(...page.attachments.map((x) => x.handle));
      pageToken = page.nextPageToken;
    }
    expect(seen).toEqual(["res_c0", "res_c1", "res_c2", "res_c3", "res_c4"]);
  });
});

const ms = (ts: { seconds: bigint; nanos: number } | undefined) =>
  ts === undefined ? undefined : Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6);

describe.each(["memory", ...serviceBackends] as const)("ListRuns  (%s)", (backendKind) => {
  let t: TestServer;
  afterEach(() => t.stop());

  it("lists each live run once with its outputs, bytes, times, TTL and fork parent", async () => {
    let clock = Date.now();
    t = await startTestServer({ backend: backendKind, now: () => clock });
    const sdk = t.sdk();
    // Longer than a stored key segment: its key holds a digest, the listing the id itself.
    const longRun = `long-${"é".repeat(55)}`;
    await sdk.offload({ tenant: "dev", runId: "plain", callId: "c1" }, "12345\n");
    clock += 1000;
    await sdk.offload({ tenant: "dev", runId: "plain", callId: "c2" }, big("two"));
    await sdk.offload({ tenant: "dev", runId: "plain", callId: "c3" }, "gone soon\n", {
      ttl: { seconds: 10n, nanos: 0 },
    });
    await sdk.offload({ tenant: "dev", runId: longRun, callId: "c1" }, "long\n");
    await sdk.offload({ tenant: "dev", runId: "temp", callId: "c1" }, "temp\n");
    const tempExpires = ms((await sdk.setRunTtl("temp", 3600)).expireTime);
    await sdk.offload({ tenant: "dev", runId: "soon", callId: "c1" }, "soon\n");
    await sdk.setRunTtl("soon", 5);
    await sdk.offload({ tenant: "dev", runId: "deleted", callId: "c1" }, "deleted\n");
    await sdk.deleteRun("deleted");
    clock += 1000;
    const forkMs = clock;
    await sdk.forkRun("plain", "child");
    await sdk.forkRun(longRun, `${longRun}-child`, { ttlSeconds: 600 });
    clock += 1000;
    await sdk.offload({ tenant: "dev", runId: "child", callId: "own" }, "own output\n");
    await sdk.forkRun("plain", "empty-fork");
    clock += 11_000;

    const runs = new Map<string, RunInfo>();
    for await (const run of sdk.listAllRuns()) {
      expect(runs.has(run.runId)).toBe(false);
      runs.set(run.runId, run);
    }
    // "soon" expired, "deleted" was deleted; "plain"'s c3 expired but the run lives on.
    expect([...runs.keys()].sort()).toEqual(
      ["child", "empty-fork", "plain", "temp", longRun, `${longRun}-child`].sort(),
    );
    const plain = runs.get("plain");
    const plainBytes = 6 + big("two").length;
    expect(plain).toMatchObject({
      outputCount: 2n,
      sizeBytes: BigInt(plainBytes),
      parentRunId: "",
    });
    expect(plain?.expireTime).toBeUndefined();
    expect((ms(plain?.updateTime) ?? 0) - (ms(plain?.createTime) ?? 0)).toBe(1000);
    expect(runs.get("temp")).toMatchObject({ outputCount: 1n, sizeBytes: 5n });
    expect(ms(runs.get("temp")?.expireTime)).toBe(tempExpires);
    // A fork counts the outputs its handles resolve to: the parent's live ones and its own.
    const child = runs.get("child");
    expect(child).toMatchObject({
      parentRunId: "plain",
      outputCount: 3n,
      sizeBytes: BigInt(plainBytes + "own output\n".length),
    });
    expect(ms(child?.createTime)).toBe(forkMs);
    expect(ms(child?.updateTime)).toBe(forkMs + 1000);
    expect(runs.get("empty-fork")).toMatchObject({ parentRunId: "plain", outputCount: 2n });
    const longChild = runs.get(`${longRun}-child`);
    expect(longChild).toMatchObject({ parentRunId: longRun, outputCount: 1n, sizeBytes: 5n });
    expect(ms(longChild?.expireTime)).toBe(forkMs + 600_000);
    expect(runs.get(longRun)).toMatchObject({ outputCount: 1n, parentRunId: "" });
  });

  it("pages through every run once, and takes a token only from its own tenant", async () => {
    t = await startTestServer({ backend: backendKind, tokens: { "tok-a": "ta", "tok-b": "tb" } });
    const [a, b] = [t.sdk("tok-a"), t.sdk("tok-b")];
    const names = Array.from({ length: 23 }, (_, i) => `run-${i}`);
    for (const runId of names) await a.offload({ tenant: "ta", runId, callId: "c" }, `${runId}\n`);
    await b.offload({ tenant: "tb", runId: "only-b", callId: "c" }, "b\n");

    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    let first = "";
    do {
      const page = await a.listRuns({ pageSize: 5, pageToken });
      expect(page.runs.length).toBeLessThanOrEqual(5);
      seen.push(...page.runs.map((r) => r.runId));
      if (pages === 0) first = page.nextPageToken;
      pageToken = page.nextPageToken;
      pages++;
    } while (pageToken !== "");
    expect(pages).toBe(5);
    expect(seen).toHaveLength(23);
    expect(new Set(seen)).toEqual(new Set(names));
    expect((await b.listRuns()).runs.map((r) => r.runId)).toEqual(["only-b"]);
    expect(await codeOf(t.raw("not-a-token").listRuns({}))).toBe(Code.Unauthenticated);

    const refused = async (call: Promise<unknown>) => {
      const err = await failureOf(call);
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toMatch(/^page_token: /);
    };
    await refused(b.listRuns({ pageToken: first }));
    const decoded = JSON.parse(Buffer.from(first, "base64url").toString("utf8"));
    const edited = Buffer.from(JSON.stringify({ ...decoded, a: "run-9" })).toString("base64url");
    await refused(a.listRuns({ pageToken: edited }));
    await refused(a.listRuns({ pageToken: "garbage!" }));
    // A ListToolOutputs token and a ListRuns token never pass for each other.
    await a.offload({ tenant: "ta", runId: "run-1", callId: "d" }, "more\n");
    const runToken = (await a.list("run-1", { pageSize: 1 })).nextPageToken;
    expect(runToken).not.toBe("");
    await refused(a.listRuns({ pageToken: runToken }));
    await refused(a.list("run-1", { pageToken: first }));
  });

  it("skips and logs a corrupt record without failing the listing", async () => {
    const warnings: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => void warnings.push(line) });
    t = await startTestServer({ backend: backendKind, logger });
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "hurt", callId: "c1" }, "good\n");
    await sdk.offload({ tenant: "dev", runId: "well", callId: "c1" }, "well\n");
    await t.backend.put("t/dev/r/hurt/h/res_corrupt", bytesBody(Buffer.from("not a record")));
    // A key no run could make, beside the runs.
    await t.backend.put("t/dev/r/stray", bytesBody(Buffer.from("junk")));
    if (backendKind === "filesystem") {
      const root = (t.backend as FilesystemBackend).root;
      await writeFile(join(t.dataDir, "outside"), "outside the root");
      await symlink(join(t.dataDir, "outside"), join(root, "t", "dev", "r", "hurt", "h", "link"));
      await symlink(t.dataDir, join(root, "t", "dev", "r", "planted"));
    }
    const page = await sdk.listRuns();
    expect(page.runs.map((r) => [r.runId, r.outputCount])).toEqual([
      ["hurt", 1n],
      ["well", 1n],
    ]);
    const logged = warnings.join("");
    expect(logged).toContain("t/dev/r/hurt/h/res_corrupt");
    expect(logged).toContain("t/dev/r/stray");
    if (backendKind === "filesystem") expect(logged).toContain("t/dev/r/hurt/h/link");
  });
  it("reads many records at once for one call without Node's listener-leak warning", async () => {
    // Each store request in flight listens on the call's signal; a listing reads up to 8 runs of
    // 16 records at once, by design, which is no leak to warn an operator about.
    t = await startTestServer({ backend: backendKind });
    const sdk = t.sdk();
    await Promise.all(
      Array.from({ length: 120 }, (_, c) =>
        sdk.offload({ tenant: "dev", runId: `many-${c % 8}`, callId: `c${c}` }, `${c}\n`),
      ),
    );
    const warnings = await listenerWarningsOf(async () => {
      const page = await sdk.listRuns({ pageSize: 100 });
      expect(page.runs.map((r) => r.outputCount)).toEqual(Array(8).fill(15n));
    });
    expect(warnings).toEqual([]);
  });
});

describe("ListRuns bounds a call", () => {
  let t: TestServer;
  afterEach(() => t.stop());

  it("counts a run longer than one listing exactly, and ends a page after 2,000 records", async () => {
    t = await startTestServer({ backend: "memory" });
    const sdk = t.sdk();
    const offloads: Promise<unknown>[] = [];
    const flush = async () => void (await Promise.all(offloads.splice(0)));
    // 1,100 records: more keys than one listing of the tenant's runs holds.
    for (let c = 0; c < 1100; c++) {
      offloads.push(sdk.offload({ tenant: "dev", runId: "a-huge", callId: `c${c}` }, "12\n"));
      if (offloads.length >= 100) await flush();
    }
    // Nine runs of 250: the first eight are summarised together and reach the budget.
    for (let r = 0; r < 9; r++) {
      for (let c = 0; c < 250; c++) {
        offloads.push(sdk.offload({ tenant: "dev", runId: `b-${r}`, callId: `c${c}` }, "1\n"));
        if (offloads.length >= 100) await flush();
      }
    }
    await flush();
    await sdk.forkRun("a-huge", "a-huge-fork");

    const first = await sdk.listRuns({ pageSize: 100 });
    // a-huge-fork, a-huge and b-0..b-5 (2,200 + 1,500 records): the budget ends the page.
    // Stored order, not alphabetical: "a-huge-fork/" sorts before "a-huge/" ("-" < "/").
    expect(first.runs.map((r) => r.runId)).toEqual([
      "a-huge-fork",
      "a-huge",
      ...Array.from({ length: 6 }, (_, i) => `b-${i}`),
    ]);
    expect(first.nextPageToken).not.toBe("");
    expect(first.runs[1]).toMatchObject({ outputCount: 1100n, sizeBytes: 3300n });
    expect(first.runs[0]).toMatchObject({ outputCount: 1100n, parentRunId: "a-huge" });
    const second = await sdk.listRuns({ pageSize: 100, pageToken: first.nextPageToken });
    expect(second.runs.map((r) => [r.runId, r.outputCount])).toEqual([
      ["b-6", 250n],
      ["b-7", 250n],
      ["b-8", 250n],
    ]);
    expect(second.nextPageToken).toBe("");
  });
});
