import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finished } from "node:stream/promises";
import { createSpillwayClient } from "@spillway/client";
import { JsonKind } from "@spillway/proto/spillway/v1/types_pb.js";
import { spawnSpillway } from "../../test/support/spawn-spillway.js";
import { jsonDocumentChunks } from "../json-document.js";
import { meterPeakRss } from "../peak-rss.js";
import { type BenchResult, ratioResult } from "../result.js";
import { settleRounds, timeSeconds } from "../timing.js";

const MiB = 1024 * 1024;
const windowLines = 100;

/**
 * jsonViewScenario measures `json_view_window_1gib`: a 1 GiB minified JSON document (an array
 * of nested records, bench/json-document.ts) is offloaded from a file (the JSON view indexed
 * in the same pass), then a 100-line JSON-view window 90% of the way through the view is
 * timed against the same window at line 0, alternating, `runs` x 10 times or, while the line-0
 * window's times are unsettled, up to three times as many (settleRounds). The row records the
 * server's peak resident memory (meterPeakRss) over the offload and the windows, and the
 * offload's throughput.
 */
export async function jsonViewScenario(runs: number, bytes = 1024 * MiB): Promise<BenchResult> {
  const dir = await mkdtemp(join(tmpdir(), "spillway-bench-json-"));
  const file = join(dir, "doc.json");
  const out = createWriteStream(file);
  for (const chunk of jsonDocumentChunks(bytes)) {
    if (!out.write(chunk)) await new Promise<void>((resolve) => out.once("drain", () => resolve()));
  }
  out.end();
  await finished(out);
  const server = await spawnSpillway(["--data-dir", join(dir, "store")]);
  try {
    const client = createSpillwayClient({ baseUrl: server.url });
    const runId = "bench-json";
    let attachment: Awaited<ReturnType<typeof client.offload>> | undefined;
    const { result: offloadSeconds, peakMiB: offloadPeak } = await meterPeakRss(server.pid, () =>
      timeSeconds(async () => {
        attachment = await client.offload(
          { tenant: "dev", runId, callId: "doc" },
          createReadStream(file, { highWaterMark: MiB }),
          { contentType: "application/json" },
        );
      }),
    );
    if (attachment?.jsonKind !== JsonKind.DOCUMENT) {
      throw new Error(`the bench document was not indexed as JSON: ${attachment?.jsonKind}`);
    }
    const viewLines = Number(attachment.jsonViewLines);
    const size = Number(attachment.sizeBytes);
    const deep = Math.floor(viewLines * 0.9);
    const timeWindow = async (offset: number): Promise<number> => {
      let rendered = "";
      const seconds = await timeSeconds(async () => {
        const w = await client.readToolOutput({
          runId,
          handle: "res_doc",
          window: { case: "json", value: { offset: BigInt(offset), limit: windowLines } },
        });
        rendered = w.rendered;
      });
      if (!rendered.includes(`\n${String(offset + 1).padStart(6)}\t`)) {
        throw new Error(`JSON window at ${offset} does not start at line ${offset + 1}`);
      }
      return seconds * 1000;
    };
    const { result: windows, peakMiB: windowPeak } = await meterPeakRss(server.pid, async () => {
      await timeWindow(0);
      await timeWindow(deep);
      return settleRounds(
        runs * 10,
        async () => ({ head: await timeWindow(0), deep: await timeWindow(deep) }),
        "head",
      );
    });
    process.stderr.write(
      `bench: json_view_window_1gib: ${(size / MiB).toFixed(0)} MiB document, ${viewLines} view lines, offload ${(size / MiB / offloadSeconds).toFixed(1)} MiB/s (${offloadSeconds.toFixed(1)} s), server peak RSS ${offloadPeak.toFixed(0)} MiB over the offload, ${windowPeak.toFixed(0)} MiB over the windows; window at line ${deep}\n`,
    );
    const row = ratioResult({
      name: "json_view_window_1gib",
      unit: "ms",
      baseline: "the same 100-line JSON-view window at line 0, same run",
      spillway: windows.deep,
      baselineSamples: windows.head,
      ratioOf: (value, baseline) => value / baseline,
      target: "ratio <= 2",
      meets: (ratio) => ratio <= 2,
    });
    return {
      ...row,
      peak_rss_mib: {
        spillway: Math.round(Math.max(offloadPeak, windowPeak)),
        baseline: Math.round(windowPeak),
      },
      json_view: {
        document_mib: Math.round(size / MiB),
        view_lines: viewLines,
        deep_line: deep,
        offload_mib_s: Math.round((size / MiB / offloadSeconds) * 10) / 10,
        offload_peak_rss_mib: Math.round(offloadPeak),
        window_peak_rss_mib: Math.round(windowPeak),
      },
    } as BenchResult;
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
