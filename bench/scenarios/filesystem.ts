import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { withFilesystemSpillway } from "../filesystem-spillway.js";
import { randomPayload, textPayload } from "../payload.js";
import { metered, type SideCpu } from "../process-cpu.js";
import { rawAtomicWrite } from "../raw-atomic-write.js";
import { type BenchResult, throughputResult } from "../result.js";
import { alternate } from "../timing.js";

const CHUNK = 1024 * 1024;

async function rawRead(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: CHUNK })) hash.update(chunk);
  return hash.digest("hex");
}

/**
 * filesystemScenarios measures `offload_256mib_fs` (text and random payloads, alternating) and
 * `read_full_256mib_fs` (a verified `readBytes`) against raw Node file I/O with sha256 on the
 * same disk. Every timed run also meters the CPU of the Spillway server and of this process (the
 * SDK's client, or the raw I/O), reported as each row's `cpu_seconds`.
 */
export async function filesystemScenarios(opts: {
  runs: number;
  bytes: number;
}): Promise<BenchResult[]> {
  return withFilesystemSpillway("fs", async ({ dir, server, client }) => {
    const raw = join(dir, "raw");
    await mkdir(raw);
    const processes = { server: server.pid, bench: "self" } as const;
    const offloadCpu: SideCpu = { spillway: [], baseline: [] };
    const readCpu: SideCpu = { spillway: [], baseline: [] };
    const payloads = [textPayload(opts.bytes), randomPayload(opts.bytes)];
    const offload = await alternate(
      opts.runs,
      metered(processes, offloadCpu, "spillway", async (run) => {
        const data = payloads[run % 2] as Buffer;
        await client.offload({ tenant: "dev", runId: "bench", callId: `o${run}` }, data);
      }),
      metered(processes, offloadCpu, "baseline", (run) =>
        rawAtomicWrite(raw, `o${run}`, payloads[run % 2] as Buffer),
      ),
    );
    // The reads may take more rounds than the offloads did (each settles on its own): round
    // `run` reads what offload round `run % written` wrote.
    const written = offload.spillwaySeconds.length + 1;
    const read = await alternate(
      opts.runs,
      metered(processes, readCpu, "spillway", async (run) => {
        // Like the baseline, every byte is hashed: the SDK checks them against the record's
        // sha256 (on a worker thread) and fails the read on a mismatch.
        let read = 0;
        for await (const chunk of client.readBytes(
          "bench",
          `res_o${run % written}`,
          {},
          { verify: true },
        )) {
          read += chunk.byteLength;
        }
        if (read !== opts.bytes) throw new Error(`read ${read} bytes of ${opts.bytes}`);
      }),
      metered(processes, readCpu, "baseline", (run) => rawRead(join(raw, `o${run % written}`))),
    );
    return [
      throughputResult({
        name: "offload_256mib_fs",
        baseline: "raw Node write + sha256 (temp, fsync, rename), same disk",
        bytes: opts.bytes,
        ...offload,
        minRatio: 0.6,
        cpu: offloadCpu,
      }),
      throughputResult({
        name: "read_full_256mib_fs",
        baseline: "raw Node read + sha256, same file size",
        bytes: opts.bytes,
        ...read,
        // Issue 26: within a tenth of reading and hashing the file directly.
        minRatio: 0.9,
        cpu: readCpu,
      }),
    ];
  });
}
