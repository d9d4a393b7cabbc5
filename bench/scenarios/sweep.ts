import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSpillwayClient } from "@spillway/client";
import { createFilesystemBackend } from "../../server/src/backends/filesystem.js";
import { defaultLimits } from "../../server/src/limits.js";
import { createSpillwayCore } from "../../server/src/service.js";
import { createSweeper } from "../../server/src/sweeper.js";
import { createWindowCaps } from "../../server/src/window/caps.js";
import { spawnSpillway } from "../../test/support/spawn-spillway.js";
import { type BenchResult, ratioResult } from "../result.js";
import { settleRounds } from "../timing.js";

const records = 20_000;
const runsOfRecords = 10;
const inFlight = 32;

/** Reads every file under dir once, whole: the least a sweep that looks at every record does. */
async function readEveryFile(dir: string): Promise<number> {
  let files = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files += await readEveryFile(path);
    else if (entry.isFile()) {
      await readFile(path);
      files++;
    }
  }
  return files;
}

/**
 * sweepScenario measures `sweep_per_record`: the CPU one sweep (`spillway sweep`, in this
 * process) spends per record over a filesystem store of 20,000 small records (4 KiB inline
 * payloads, every tenth a 32 KiB blob, half with a per-record TTL that has not run out, so the
 * sweep removes nothing), written through a server with 32 offloads in flight, against reading
 * every file of the same store once from Node, alternating: `runs` rounds, or up to three times
 * as many while the reads' CPU is unsettled (settleRounds). Target: at most 170 µs of CPU a
 * record, a tenth of the 1.7 ms issue 21 measured.
 */
export async function sweepScenario(runs: number): Promise<BenchResult> {
  const dir = await mkdtemp(join(tmpdir(), "spillway-bench-sweep-"));
  const store = join(dir, "store");
  try {
    const server = await spawnSpillway(["--data-dir", store, "--sweep-interval-ms", "3600000"]);
    try {
      const client = createSpillwayClient({ baseUrl: server.url });
      const small = randomBytes(4 * 1024);
      const large = randomBytes(32 * 1024);
      let next = 0;
      const worker = async () => {
        while (next < records) {
          const i = next++;
          await client.offload(
            { tenant: "dev", runId: `sweep-${i % runsOfRecords}`, callId: `c${i}` },
            i % 10 === 0 ? large : small,
            i % 2 === 0 ? { ttl: { seconds: 86_400n } } : {},
          );
        }
      };
      await Promise.all(Array.from({ length: inFlight }, worker));
    } finally {
      await server.stop();
    }
    const backend = createFilesystemBackend({ root: store });
    const core = createSpillwayCore({
      backend,
      limits: defaultLimits,
      caps: createWindowCaps(),
    });
    const sweeper = createSweeper(core, { intervalMs: 60_000, orphanAgeMs: 3_600_000 });
    const cpuMicros = async (fn: () => Promise<unknown>) => {
      const before = process.cpuUsage();
      await fn();
      const used = process.cpuUsage(before);
      return (used.user + used.system) / records;
    };
    // One untimed round of each first (warm caches, compiled code).
    await readEveryFile(store);
    await sweeper.sweepOnce();
    const { spillway, baseline } = await settleRounds(
      runs,
      async () => ({
        baseline: await cpuMicros(() => readEveryFile(store)),
        spillway: await cpuMicros(async () => {
          const report = await sweeper.sweepOnce();
          if (
            report === undefined ||
            report.expiredRecords + report.orphanBlobs + report.expiredRuns + report.refused !== 0
          ) {
            throw new Error(`the sweep removed live data: ${JSON.stringify(report)}`);
          }
        }),
      }),
      "baseline",
    );
    return ratioResult({
      name: "sweep_per_record",
      unit: "µs CPU/record",
      baseline: "reading every file of the same store once from Node (readdir, readFile)",
      spillway,
      baselineSamples: baseline,
      ratioOf: (value, base) => value / base,
      target: "<= 170 µs CPU a record (a tenth of the 1.7 ms issue 21 measured)",
      meets: (_ratio, value) => value <= 170,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
