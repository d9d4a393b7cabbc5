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
