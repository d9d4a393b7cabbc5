import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetrics, type Metrics } from "../server/src/metrics.js";
import { failureOf } from "./support/code-of.js";
import { serviceBackends, startTestServer, type TestServer } from "./support/test-server.js";

/** The count of spillway_server_faults_total over every label. */
async function serverFaults(metrics: Metrics): Promise<number> {
  const metric = metrics.registry.getSingleMetric("spillway_server_faults_total");
  return ((await metric?.get())?.values ?? []).reduce((sum, v) => sum + v.value, 0);
}

/**
 * An acknowledged output whose stored bytes vanished behind the server's back (a cleanup job, a
 * bucket policy, an operator) is data lost: the read must say so (DATA_LOSS, which pages), not
 * NOT_FOUND, which reads as the client's mistake and which no alert counts.
 */
describe.each(serviceBackends)("a payload lost from the %s store", (kind) => {
  let t: TestServer;
  let metrics: Metrics;
  beforeAll(async () => {
    metrics = createMetrics();
    t = await startTestServer({ backend: kind, metrics });
  });
  afterAll(() => t.stop());

  /** Offloads a blob-stored output (over the inline limit) and deletes every blob of its run. */
  const offloadThenLose = async (runId: string) => {
    const lines = Array.from({ length: 5_000 }, (_, i) => `line ${i} of the build log`);
    await t.sdk().offload({ tenant: "dev", runId, callId: "c" }, `${lines.join("\n")}\n`);
    const blobs = await t.backend.list(`t/dev/r/${runId}/b/`);
    expect(blobs.keys.length).toBeGreaterThan(0);
    await t.backend.deleteMany(blobs.keys);
  };

  it("answers DATA_LOSS naming the output, counted as a server fault", async () => {
    await offloadThenLose("lost");
    const before = await serverFaults(metrics);
    for (const window of [
      { case: "bytes", value: { offset: 0n } },
      { case: "lines", value: { offset: 4_000n, limit: 3 } },
      { case: "search", value: { pattern: "line 4999 " } },
    ] as const) {
      const err = await failureOf(
        t.sdk().readToolOutput({ runId: "lost", handle: "res_c", window }),
      );
      expect(err.code, window.case).toBe(Code.DataLoss);
      expect(err.rawMessage).toMatch(
        /^the (stored payload|line index) of "res_c" is missing from the store$/,
      );
    }
    expect(await serverFaults(metrics)).toBeGreaterThan(before);
  });

  it("answers a read that races the run's deletion as for any deleted handle", async () => {
    await offloadThenLose("gone");
    await t.sdk().deleteRun("gone");
    const err = await failureOf(
      t
        .sdk()
        .readToolOutput({ runId: "gone", handle: "res_c", window: { case: "bytes", value: {} } }),
    );
    expect(err.code).toBe(Code.PermissionDenied);
  });
});

/**
 * One record damaged in the store (a bad disk block, a stray write) must cost that output
 * alone: the run's other outputs stay listed, and what fails says which output it is.
 */
describe.each(serviceBackends)("a record corrupted in the %s store", (kind) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ backend: kind });
    for (let i = 0; i < 20; i++) {
      await t.sdk().offload({ tenant: "dev", runId: "run", callId: `c${i}` }, `output ${i}\n`);
    }
    const records = await t.backend.list("t/dev/r/run/h/");
    const damaged = records.keys.find((key) => key.endsWith("/res_c7"));
    if (damaged === undefined) throw new Error(`no record res_c7 in ${records.keys.join(", ")}`);
    await t.backend.delete(damaged);
    await t.backend.put(
      damaged,
      (async function* () {
        yield new TextEncoder().encode("garbage{");
      })(),
    );
  });
  afterAll(() => t.stop());

  it("lists the run's other outputs", async () => {
    const handles: string[] = [];
    for await (const a of t.sdk().listAll("run")) handles.push(a.handle);
    expect(handles).toHaveLength(19);
    expect(handles).not.toContain("res_c7");
  });

  it("names the damaged output where it fails", async () => {
    const fork = await failureOf(t.sdk().forkRun("run", "child"));
    expect(fork.code).toBe(Code.DataLoss);
    expect(fork.rawMessage).toContain('(output "res_c7")');
    const read = await failureOf(
      t
        .sdk()
        .readToolOutput({ runId: "run", handle: "res_c7", window: { case: "lines", value: {} } }),
    );
    expect(read.code).toBe(Code.DataLoss);
    expect(read.rawMessage).toContain('(output "res_c7")');
  });
});
