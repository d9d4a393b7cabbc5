import { randomBytes } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { type Topology, withFilesystemSpillway } from "../filesystem-spillway.js";
import { pool } from "../pool.js";
import { rawAtomicWrite } from "../raw-atomic-write.js";
import { type BenchResult, ratioResult } from "../result.js";
import { alternate } from "../timing.js";

const count = 10_000;
const inFlight = 32;
const size = 4 * 1024;

/**
 * smallOffloadScenario measures `small_offloads`: 10,000 offloads of 4 KiB with 32 in flight
 * from one SDK client to the filesystem backend, against the same number of atomic file writes
 * (rawAtomicWrite) from Node at the same concurrency on the same disk. Target: ratio >= 1 and
 * at least 8,000 offloads/s. `topology` lays out the server and client (see
 * concurrentOffloadScenario).
 */
export async function smallOffloadScenario(runs: number, topology: Topology): Promise<BenchResult> {
  return withFilesystemSpillway(
    "small",
    async ({ dir, client }) => {
      const payloads = Array.from({ length: 64 }, () => randomBytes(size));
      const timed = await alternate(
        runs,
        (run) =>
          pool(count, inFlight, (i) =>
            client.offload(
              { tenant: "dev", runId: `small-${run}`, callId: `c${i}` },
              payloads[i % payloads.length] as Buffer,
            ),
          ),
        async (run) => {
          const target = join(dir, "raw", String(run));
          await mkdir(target, { recursive: true });
          await pool(count, inFlight, (i) =>
            rawAtomicWrite(target, `c${i}`, payloads[i % payloads.length] as Buffer),
          );
        },
      );
      const perSecond = (seconds: number[]) => seconds.map((s) => count / s);
      return ratioResult({
        name: `small_offloads${topology.suffix}`,
        unit: "offloads/s",
        baseline:
          "atomic file writes (sha256, temp, fsync, rename) from Node, 32 in flight, same disk",
        spillway: perSecond(timed.spillwaySeconds),
        baselineSamples: perSecond(timed.baselineSeconds),
        ratioOf: (value, baseline) => value / baseline,
        target: "ratio >= 1 and >= 8000 offloads/s",
        meets: (ratio, value) => ratio >= 1 && value >= 8000,
      });
    },
    topology.args,
    topology.client,
  );
}
