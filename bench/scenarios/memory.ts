import { createReadStream } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { createSpillwayClient } from "@spillway/client";
import { spawnSpillway } from "../../test/support/spawn-spillway.js";
import type { LogFixture } from "../log-fixture.js";
import { meterPeakRss, statusMiB } from "../peak-rss.js";
import { type BenchResult, ratioResult } from "../result.js";
import { settleRounds } from "../timing.js";

const MiB = 1024 * 1024;
const fastReaders = 7;

/**
 * Reads the whole log in bytes mode; `pause` ms between frames makes a slow reader. Each reader
 * has its own client, and so its own HTTP/2 connection, as separate agents would: readers
 * sharing one connection also share its flow-control window, where a slow one stalls the rest.
 */
async function fullRead(
  fx: LogFixture,
  url: string,
  signal: AbortSignal,
  pause = 0,
): Promise<number> {
  const client = createSpillwayClient({ baseUrl: url });
  let bytes = 0;
  for await (const frame of client.raw.readToolOutput(
    {
      runId: fx.runId,
      handle: fx.handle,
      window: { case: "bytes", value: { offset: 0n } },
      omitRendered: true,
    },
    { signal },
  )) {
    if (frame.frame.case === "content" && frame.frame.value.body.case === "data") {
      bytes += frame.frame.value.body.value.byteLength;
      if (pause > 0) await sleep(pause);
    }
  }
  return bytes;
}

/**
 * memoryScenario measures `memory_under_load`: the peak resident memory of a fresh replica
 * (started on the fixture's data directory, so it serves the 1 GiB log it did not write) while
 * one 1 GiB offload and 8 full reads of the log (one of them deliberately slow, cancelled once
 * the others are done) run at once, against its idle RSS. The peak is the kernel's high-water
 * mark (VmHWM, reset before each run) or the highest 20 ms sample, whichever is higher. Each
 * round starts its own replica, so each reads the idle RSS afresh: `runs` rounds, or up to
 * three times as many while the idle readings are unsettled (settleRounds).
 */
export async function memoryScenario(fx: LogFixture, runs: number): Promise<BenchResult> {
  const { idle, peak } = await settleRounds(
    runs,
    async (run) => {
      const replica = await spawnSpillway(["--data-dir", fx.dataDir]);
      try {
        const { pid } = replica;
        await sleep(500);
        const idleMiB = await statusMiB(pid, "VmRSS");
        const { result: read, peakMiB } = await meterPeakRss(pid, async () => {
          const slow = new AbortController();
          const slowRead = fullRead(fx, replica.url, slow.signal, 50).catch(() => 0);
          const done = new AbortController();
          const reads = Array.from({ length: fastReaders }, () =>
            fullRead(fx, replica.url, done.signal),
          );
          const offload = createSpillwayClient({ baseUrl: replica.url }).offload(
            { tenant: "dev", runId: fx.runId, callId: `load-${run}` },
            createReadStream(fx.log.path, { highWaterMark: MiB }),
          );
          const fast = await Promise.all(reads);
          await offload;
          slow.abort();
          await slowRead;
          return fast;
        });
        if (read.some((n) => n !== fx.log.bytes)) {
          throw new Error(`a full read came back short: ${read}`);
        }
        return { idle: idleMiB, peak: peakMiB };
      } finally {
        await replica.stop();
      }
    },
    "idle",
  );
  return ratioResult({
    name: "memory_under_load",
    unit: "MiB",
    baseline: "the same replica's idle RSS before the load",
    spillway: peak,
    baselineSamples: idle,
    ratioOf: (value, baseline) => value / baseline,
    target: "peak <= 256 MiB",
    meets: (_ratio, value) => value <= 256,
  });
}
