import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSpillwayClient } from "../../clients/ts/src/client.js";
import { spawnSpillway } from "../../test/support/spawn-spillway.js";
import { rawAtomicWrite } from "../raw-atomic-write.js";
import { type BenchResult, ratioResult } from "../result.js";
import { alternate } from "../timing.js";

const count = 10_000;
const inFlight = 32;
const size = 4 * 1024;

/** Runs `task(0..count-1)` with at most `inFlight` running at once. */
async function pool(task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

/**
 * smallOffloadScenario measures `small_offloads`: 10,000 offloads of 4 KiB with 32 in flight
 * to the filesystem backend, against the same number of atomic file writes (rawAtomicWrite)
 * from Node at the
 * same concurrency on the same disk. Target: ratio >= 0.5 and at least 2,000 offloads/s.
 */
export async function smallOffloadScenario(runs: number): Promise<BenchResult> {
  const dir = await mkdtemp(join(tmpdir(), "spillway-bench-small-"));
  const server = await spawnSpillway(["--data-dir", join(dir, "store")]);
  try {
    const client = createSpillwayClient({ baseUrl: server.url });
    const payloads = Array.from({ length: 64 }, () => randomBytes(size));
    const timed = await alternate(
      runs,
      (run) =>
        pool((i) =>
          client.offload(
            { tenant: "dev", runId: `small-${run}`, callId: `c${i}` },
            payloads[i % payloads.length] as Buffer,
          ),
        ),
      async (run) => {
        const target = join(dir, "raw", String(run));
        await mkdir(target, { recursive: true });
        await pool((i) => rawAtomicWrite(target, `c${i}`, payloads[i % payloads.length] as Buffer));
      },
    );
    const perSecond = (seconds: number[]) => seconds.map((s) => count / s);
    return ratioResult({
      name: "small_offloads",
      unit: "offloads/s",
      baseline:
        "atomic file writes (sha256, temp, fsync, rename) from Node, 32 in flight, same disk",
      spillway: perSecond(timed.spillwaySeconds),
      baselineSamples: perSecond(timed.baselineSeconds),
      ratioOf: (value, baseline) => value / baseline,
      target: "ratio >= 0.5 and >= 2000 offloads/s",
      meets: (ratio, value) => ratio >= 0.5 && value >= 2000,
    });
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
