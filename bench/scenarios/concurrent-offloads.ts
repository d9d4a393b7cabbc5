import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { type Topology, withFilesystemSpillway } from "../filesystem-spillway.js";
import { randomPayload, textPayload } from "../payload.js";
import { metered, type SideCpu } from "../process-cpu.js";
import { rawAtomicWrite } from "../raw-atomic-write.js";
import { type BenchResult, throughputResult } from "../result.js";
import { alternate } from "../timing.js";

const MiB = 1024 * 1024;

/**
 * concurrentOffloadScenario measures `offload_concurrent_16`: `streams` offloads of `bytes`
 * each, all in flight at once from one SDK client to the filesystem backend, against as many
 * atomic file writes (rawAtomicWrite: sha256, temp, fsync, rename) of the same payloads at once
 * from this process, on the same disk. Half the payloads are log-like text, half random bytes.
 * The row is the aggregate MiB/s and, per timed run, the CPU of the server's processes and of
 * this process (`cpu_seconds`): how much of the machine's cores the server puts to work. Each
 * run's outputs are deleted before the next, so the disk holds one run at a time. `topology`
 * lays out the server and client: a worker a core as `spillway serve` runs by default, or one
 * (`_one_worker`).
 */
export async function concurrentOffloadScenario(opts: {
  runs: number;
  streams: number;
  bytes: number;
  topology: Topology;
}): Promise<BenchResult> {
  return withFilesystemSpillway(
    "concurrent",
    async ({ dir, server, client }) => {
      const processes = { server: server.pids(), bench: "self" } as const;
      const cpu: SideCpu = { spillway: [], baseline: [] };
      const payloads = Array.from({ length: opts.streams }, (_, i) =>
        i % 2 === 0 ? textPayload(opts.bytes) : randomPayload(opts.bytes),
      );
      const timed = await alternate(
        opts.runs,
        metered(processes, cpu, "spillway", async (run) => {
          const runId = `concurrent-${run}`;
          await Promise.all(
            payloads.map((data, i) =>
              client.offload({ tenant: "dev", runId, callId: `c${i}` }, data),
            ),
          );
          await client.deleteRun(runId);
        }),
        metered(processes, cpu, "baseline", async (run) => {
          const target = join(dir, "raw", String(run));
          await mkdir(target, { recursive: true });
          await Promise.all(payloads.map((data, i) => rawAtomicWrite(target, `c${i}`, data)));
          await rm(target, { recursive: true });
        }),
      );
      return throughputResult({
        name: `offload_concurrent_${opts.streams}${opts.topology.suffix}`,
        baseline: `${opts.streams} raw Node atomic writes at once (sha256, temp, fsync, rename), same disk`,
        bytes: opts.streams * opts.bytes,
        ...timed,
        minRatio: 0.8,
        cpu,
      });
    },
    opts.topology.args,
    opts.topology.client,
  );
}

/** The shape: 16 offloads of 64 MiB at once, 1 GiB a run. */
export const concurrentOffloads = { streams: 16, bytes: 64 * MiB } as const;
