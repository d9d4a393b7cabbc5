import { randomBytes } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { SpillwayClient } from "@spillway/client";
import { withFilesystemSpillway } from "../filesystem-spillway.js";
import { pool } from "../pool.js";
import { cpuSecondsOf, medianCpu, meterCpu, type SideCpu } from "../process-cpu.js";
import { rawAtomicWrite } from "../raw-atomic-write.js";
import { type BenchResult, ratioResult } from "../result.js";
import { settleRounds } from "../timing.js";

const replayCount = 2_000;
const deleteCount = 10_000;
const inFlight = 32;
const size = 4 * 1024;

/** The server's CPU microseconds per operation while `fn` runs `count` of them. */
async function serverMsPerOp(pid: number, count: number, fn: () => Promise<unknown>) {
  const before = await cpuSecondsOf(pid);
  await fn();
  return (((await cpuSecondsOf(pid)) - before) * 1e6) / count;
}

/** Offloads keys c0..c{count-1} of run `runId`, cycling through `payloads`, `inFlight` at once. */
function offloadAll(
  client: SpillwayClient,
  runId: string,
  payloads: readonly Buffer[],
  count = replayCount,
) {
  return pool(count, inFlight, (i) =>
    client.offload(
      { tenant: "dev", runId, callId: `c${i}` },
      payloads[i % payloads.length] as Buffer,
    ),
  );
}

/**
 * replayScenario measures `replay_offloads`: the Spillway server's CPU per replayed offload
 * (2,000 keys of 4 KiB offloaded again with the same bytes, as an SDK retry does, 32 in flight)
 * against its CPU per new offload of the same keys just before, on the filesystem backend:
 * `runs` rounds, or up to three times as many while the new offloads' CPU is unsettled
 * (settleRounds). Target: a replay costs about what a new offload costs (ratio <= 1.2).
 */
export async function replayScenario(runs: number): Promise<BenchResult> {
  return withFilesystemSpillway("replay", async ({ server, client }) => {
    const payloads = Array.from({ length: 64 }, () => randomBytes(size));
    /** One round: the new offloads of run `run`'s keys, then their replays. */
    const round = async (run: number) => {
      const runId = `replay-${run}`;
      const created = await serverMsPerOp(server.pid, replayCount, () =>
        offloadAll(client, runId, payloads),
      );
      const again = await serverMsPerOp(server.pid, replayCount, () =>
        offloadAll(client, runId, payloads),
      );
      return { created, again };
    };
    // Run 0 warms both paths up and is not counted.
    await round(0);
    const { created: fresh, again: replayed } = await settleRounds(runs, round, "created");
    return ratioResult({
      name: "replay_offloads",
      unit: "server CPU µs/offload",
      baseline:
        "new offloads of the same 2,000 keys of 4 KiB just before, 32 in flight, same server",
      spillway: replayed,
      baselineSamples: fresh,
      ratioOf: (value, baseline) => value / baseline,
      target: "ratio <= 1.2",
      meets: (ratio) => ratio <= 1.2,
    });
  });
}

/**
 * deleteRunScenario measures `delete_run_10k`: the wall microseconds per record of a DeleteRun
 * of a run of 10,000 offloads of 4 KiB on the filesystem backend, against removing a directory
 * of 10,000 files of 4 KiB written by rawAtomicWrite (`fs.rm`, recursive) on the same disk.
 * Both follow the disk, so the target is the ratio: <= 2. `runs` rounds, or up to three times
 * as many while the `fs.rm` times are unsettled (settleRounds). Each timed run also meters the
 * CPU of the server and of this process (the row's `cpu_seconds`).
 */
export async function deleteRunScenario(runs: number): Promise<BenchResult> {
  return withFilesystemSpillway("delete", async ({ dir, server, client }) => {
    const payloads = Array.from({ length: 64 }, () => randomBytes(size));
    const cpu: SideCpu = { spillway: [], baseline: [] };
    const processes = { server: server.pid, bench: "self" } as const;
    /** One round: DeleteRun of run `run`, then fs.rm of as many raw files; returns µs/record. */
    const round = async (run: number) => {
      const runId = `delete-${run}`;
      // Run 0 warms both sides up on a tenth of the records and is not counted.
      const count = run === 0 ? deleteCount / 10 : deleteCount;
      await offloadAll(client, runId, payloads, count);
      const raw = join(dir, "raw", String(run));
      await mkdir(raw, { recursive: true });
      await pool(count, inFlight, (i) =>
        rawAtomicWrite(raw, `c${i}`, payloads[i % payloads.length] as Buffer),
      );
      const deleted = await meterCpu(processes, async () => {
        const res = await client.deleteRun(runId);
        if (Number(res.deletedAttachments) !== count) {
          throw new Error(`DeleteRun removed ${res.deletedAttachments} records, not ${count}`);
        }
      });
      const removed = await meterCpu(processes, () => rm(raw, { recursive: true }));
      if (run > 0) {
        cpu.spillway.push(deleted);
        cpu.baseline.push(removed);
      }
      return {
        spillway: ((deleted.wall ?? 0) * 1e6) / count,
        baseline: ((removed.wall ?? 0) * 1e6) / count,
      };
    };
    await round(0);
    const { spillway, baseline } = await settleRounds(runs, round, "baseline");
    const row = ratioResult({
      name: "delete_run_10k",
      unit: "µs/record",
      baseline: "fs.rm of a directory of 10,000 atomically written 4 KiB files, same disk",
      spillway,
      baselineSamples: baseline,
      ratioOf: (value, baseline) => value / baseline,
      target: "ratio <= 2",
      meets: (ratio) => ratio <= 2,
    });
    return {
      ...row,
      cpu_seconds: { spillway: medianCpu(cpu.spillway), baseline: medianCpu(cpu.baseline) },
    };
  });
}
