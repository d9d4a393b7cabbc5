import { execFileSync } from "node:child_process";
import { mkdir, readdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bytesBody } from "../server/src/backends/body.js";
import type { FilesystemBackend } from "../server/src/backends/filesystem.js";
import { createMetrics } from "../server/src/metrics.js";
import { createSweeper, type SweepLogger } from "../server/src/sweeper.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** A logger that keeps what the sweeper logs. */
function recordingLog(): SweepLogger & { readonly lines: { key?: unknown; message: string }[] } {
  const lines: { key?: unknown; message: string }[] = [];
  const keep = (fields: Record<string, unknown>, message: string) =>
    lines.push({ key: fields.key, message });
  return { lines, warn: keep, error: keep, debug: () => undefined };
}

async function metricValue(
  metrics: ReturnType<typeof createMetrics>,
  name: string,
): Promise<number> {
  const metric = await metrics.registry.getSingleMetric(name)?.get();
  return (metric?.values ?? []).reduce((sum, v) => sum + v.value, 0);
}

describe("sweeper on the filesystem", () => {
  let t: TestServer;
  let clock = Date.now();
  afterEach(() => t.stop());

  it("refuses and reports a symlink, a special file and a corrupt record, and still removes every tenant's expired runs", async () => {
    clock = Date.now();
    t = await startTestServer({
      backend: "filesystem",
      now: () => clock,
      tokens: { alpha: "alpha", zulu: "zulu" },
    });
    const root = (t.backend as FilesystemBackend).root;
    for (const tenant of ["alpha", "zulu"]) {
      const sdk = t.sdk(tenant);
      await sdk.offload({ tenant, runId: "temp", callId: "c1" }, `${tenant} temporary\n`);
      await sdk.offload({ tenant, runId: "temp", callId: "c2" }, "x".repeat(100_000));
      await sdk.setRunTtl("temp", 60);
      await sdk.offload({ tenant, runId: "keep", callId: "c1" }, `${tenant} kept\n`);
    }
    // Junk under the root: a symlink to a directory outside, sorting before every tenant; a
    // FIFO and a corrupt record in a run that stays; a symlink in place of a record.
    const outside = join(t.dataDir, "outside");
    await mkdir(outside);
    await writeFile(join(outside, "planted"), "outside the root");
    await symlink(outside, join(root, "t", "aaa"));
    const keepRegistry = join(root, "t", "alpha", "r", "keep", "h");
    execFileSync("mkfifo", [join(keepRegistry, "fifo")]);
    await writeFile(join(keepRegistry, "corrupt"), "not a record");
    await symlink(join(outside, "planted"), join(keepRegistry, "link"));

    // An upload cut off before its commit, in both kept runs: swept where every record of the
    // run could be read, kept where one could not (it might have referred to it).
    for (const tenant of ["alpha", "zulu"]) {
      await t.backend.put(`t/${tenant}/r/keep/b/lost/upload`, bytesBody(Buffer.from("lost")));
    }

    clock += 61_000;
    const metrics = createMetrics();
    const log = recordingLog();
    const sweeper = createSweeper(t.server.core, {
      intervalMs: 60_000,
      orphanAgeMs: 30_000,
      log,
      metrics,
    });
    const report = await sweeper.sweepOnce();
    expect(report).toMatchObject({ expiredRuns: 2, refused: 4, orphanBlobs: 1 });
    expect(await t.backend.head("t/alpha/r/keep/b/lost/upload")).toBeDefined();
    expect(await t.backend.head("t/zulu/r/keep/b/lost/upload")).toBeUndefined();
    expect(await readdir(join(root, "t", "alpha", "r"))).toEqual(["keep"]);
    expect(await readdir(join(root, "t", "zulu", "r"))).toEqual(["keep"]);
    expect(log.lines.map((line) => line.key).sort()).toEqual([
      "t/aaa",
      "t/alpha/r/keep/h/corrupt",
      "t/alpha/r/keep/h/fifo",
      "t/alpha/r/keep/h/link",
    ]);
    expect(await metricValue(metrics, "spillway_sweep_refused_total")).toBe(4);
    expect(await readFile(join(outside, "planted"), "utf8")).toBe("outside the root");
    for (const tenant of ["alpha", "zulu"]) {
      const read = await t.sdk(tenant).readToolOutput({ runId: "keep", handle: "res_c1" });
      expect(read.rendered).toContain(`${tenant} kept`);
    }
  });

  it("never runs two sweeps at once: a second start while one runs is skipped and counted", async () => {
    t = await startTestServer({ backend: "filesystem" });
    const sdk = t.sdk();
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        sdk.offload({ tenant: "dev", runId: "r", callId: `c${i}` }, `line ${i}\n`),
      ),
    );
    const metrics = createMetrics();
    const sweeper = createSweeper(t.server.core, {
      intervalMs: 60_000,
      orphanAgeMs: 3_600_000,
      metrics,
    });
    const first = sweeper.sweepOnce();
    const second = await sweeper.sweepOnce();
    expect(second).toBeUndefined();
    expect(await first).toMatchObject({ expiredRecords: 0, refused: 0 });
    expect(await metricValue(metrics, "spillway_sweeps_skipped_total")).toBe(1);
    // Once it is done, the next one runs.
    expect(await sweeper.sweepOnce()).toMatchObject({ refused: 0 });
  });

  it("ends a sweep under way with CANCELED on stop, and stop waits for nothing else", async () => {
    t = await startTestServer({ backend: "filesystem" });
    const sdk = t.sdk();
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        sdk.offload({ tenant: "dev", runId: "r", callId: `c${i}` }, `line ${i}\n`),
      ),
    );
    const sweeper = createSweeper(t.server.core, { intervalMs: 60_000, orphanAgeMs: 3_600_000 });
    const sweeping = sweeper.sweepOnce();
    await sweeper.stop();
    const err = await sweeping.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(ConnectError.from(err).code).toBe(Code.Canceled);
    // Nothing was lost by stopping half way.
    expect((await sdk.readToolOutput({ runId: "r", handle: "res_c199" })).rendered).toContain(
      "line 199",
    );
  });
  describe("scheduled sweeps", () => {
    /** Offloads enough outputs that a sweep walks three pages of keys. */
    async function storeOfThreePages(): Promise<void> {
      t = await startTestServer({ backend: "filesystem" });
      const sdk = t.sdk();
      await Promise.all(
        Array.from({ length: 2100 }, (_, i) =>
          sdk.offload({ tenant: "dev", runId: "r", callId: `c${i}` }, `line ${i}\n`),
        ),
      );
    }

    /** recordingLog, also resolving `finished(n)` once n sweeps have finished. */
    function finishedSweeps() {
      let count = 0;
      const waiting: { n: number; resolve: () => void }[] = [];
      const log = {
        ...recordingLog(),
        debug(_fields: Record<string, unknown>, message: string) {
          if (message !== "sweep finished") return;
          count++;
          for (const w of waiting.filter((w) => w.n <= count)) w.resolve();
        },
      };
      const finished = (n: number) =>
        new Promise<void>((resolve) => {
          if (count >= n) resolve();
          else waiting.push({ n, resolve });
        });
      return { log, finished };
    }

    it("wait after each page until their work is a tenth of their time; sweepOnce does not", async () => {
      await storeOfThreePages();
      // A clock that moves 10 ms between any two readings: every page seems to take 10 ms.
      let now = 0;
      const waits: number[] = [];
      const { log, finished } = finishedSweeps();
      const pace = {
        clock: () => {
          now += 10;
          return now;
        },
        wait: async (ms: number) => {
          waits.push(ms);
        },
      };
      const sweeper = createSweeper(t.server.core, {
        intervalMs: 3_600_000,
        orphanAgeMs: 3_600_000,
        log,
        pace,
      });
      expect(await sweeper.sweepOnce()).toMatchObject({ refused: 0 });
      expect(waits).toEqual([]);

      const scheduled = createSweeper(t.server.core, {
        intervalMs: 1,
        orphanAgeMs: 3_600_000,
        log,
        pace,
      });
      scheduled.start();
      await finished(2);
      await scheduled.stop();
      // Three pages a sweep, a wait between two pages: 90 ms after each 10 ms page.
      expect(waits.length).toBeGreaterThanOrEqual(2);
      expect(new Set(waits)).toEqual(new Set([90]));
    });

    it("wait after the orphan blobs' checks and the leftovers pass too, not only the walk", async () => {
      t = await startTestServer({ backend: "filesystem" });
      await t.sdk().offload({ tenant: "dev", runId: "r", callId: "kept" }, "kept\n");
      // Blobs no record refers to: uploads a crash cut off.
      for (let i = 0; i < 3; i++) {
        await t.backend.put(`t/dev/r/r/b/lost-${i}/upload`, bytesBody(Buffer.from("lost")));
      }
      let now = 0;
      const waits: number[] = [];
      let waitsWhenFinished: number | undefined;
      const { log, finished } = finishedSweeps();
      const sweeper = createSweeper(t.server.core, {
        intervalMs: 1,
        orphanAgeMs: 0,
        log: {
          ...log,
          debug(fields, message) {
            if (message === "sweep finished") waitsWhenFinished ??= waits.length;
            log.debug(fields, message);
          },
        },
        pace: {
          clock: () => {
            now += 10;
            return now;
          },
          wait: async (ms: number) => {
            waits.push(ms);
          },
        },
      });
      sweeper.start();
      await finished(1);
      await sweeper.stop();
      // One page of the walk, one page of orphan checks, the leftovers pass: a wait after each.
      expect(waitsWhenFinished).toBe(3);
      expect(await t.backend.head("t/dev/r/r/b/lost-0/upload")).toBeUndefined();
    });

    it("start the next sweep as the last one ends when it took longer than the interval, skipping none", async () => {
      await storeOfThreePages();
      const metrics = createMetrics();
      const { log, finished } = finishedSweeps();
      const sweeper = createSweeper(t.server.core, {
        intervalMs: 1,
        orphanAgeMs: 3_600_000,
        log,
        metrics,
        pace: { workShare: 1 },
      });
      sweeper.start();
      await finished(3);
      await sweeper.stop();
      expect(await metricValue(metrics, "spillway_sweeps_skipped_total")).toBe(0);
      expect(log.lines).toEqual([]);
    });

    it("end a paced sweep's wait on stop", async () => {
      await storeOfThreePages();
      // Pages seem to take an hour each: the wait after the first would last nine.
      let now = 0;
      let readings = 0;
      const sweeper = createSweeper(t.server.core, {
        intervalMs: 1,
        orphanAgeMs: 3_600_000,
        pace: {
          clock: () => {
            readings++;
            now += 3_600_000;
            return now;
          },
        },
      });
      sweeper.start();
      // The scheduler reads the clock as the sweep starts, the sweep before and after a page.
      await vi.waitUntil(() => readings >= 3, { timeout: 10_000, interval: 5 });
      await sweeper.stop();
      expect(readings).toBe(3);
    });
  });
});
