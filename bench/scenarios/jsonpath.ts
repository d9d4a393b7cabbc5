import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { spawnSpillway } from "../../test/support/spawn-spillway.js";
import { jsonDocumentChunks } from "../json-document.js";
import { meterPeakRss, statusMiB } from "../peak-rss.js";
import { type BenchResult, ratioResult } from "../result.js";
import { settleRounds, timeSeconds } from "../timing.js";

const MiB = 1024 * 1024;
const runId = "bench-jsonpath";
const handle = "res_doc";

/** A filter on the current node: each record is held (its status and score only) and tested. */
export const filterQuery = "$.items[?@.status == 'failed' && @.score > 999.9].id";
/** Descendants with a filter: every node of the document is visited. */
export const descendantQuery = "$..events[?@.latency_ms > 999.99].at";

/** Writes the generated document to `path`; returns its size. */
async function writeDocument(path: string, bytes: number): Promise<number> {
  const out = createWriteStream(path);
  let size = 0;
  for (const chunk of jsonDocumentChunks(bytes)) {
    size += chunk.length;
    if (!out.write(chunk)) await new Promise<void>((resolve) => out.once("drain", () => resolve()));
  }
  await new Promise<void>((resolve, reject) =>
    out.end((err?: Error) => (err ? reject(err) : resolve())),
  );
  return size;
}

/** Runs a JSONPath window over the whole document and checks it scanned all of it. */
async function query(client: SpillwayClient, text: string): Promise<void> {
  const w = await client.readToolOutput({
    runId,
    handle,
    window: { case: "jsonPath", value: { query: text, maxMatches: 100 } },
  });
  if (w.trailer?.eof !== true || w.trailer.totalMatches === undefined) {
    throw new Error(`query ${text} did not scan the whole document: ${w.rendered.slice(0, 300)}`);
  }
}

/** Reads the whole document in bytes mode (the floor any scan of it pays). */
async function fullRead(client: SpillwayClient, size: number): Promise<void> {
  let bytes = 0;
  for await (const frame of client.raw.readToolOutput({
    runId,
    handle,
    window: { case: "bytes", value: { offset: 0n } },
    omitRendered: true,
  })) {
    if (frame.frame.case === "content" && frame.frame.value.body.case === "data") {
      bytes += frame.frame.value.body.value.byteLength;
    }
  }
  if (bytes !== size) throw new Error(`bytes read ${bytes}, expected ${size}`);
}

/**
 * jsonPathScenarios measures JSONPath windows over a 1 GiB realistic JSON document (an object
 * with an array of about 1.3 million nested records), offloaded to a filesystem-backend
 * server: `jsonpath_filter_1gib` and `jsonpath_descendant_1gib` are the throughput of a query
 * that scans the whole document, against reading the same document in bytes mode;
 * `jsonpath_peak_rss_1gib` is the server's peak resident memory over all those queries (the
 * kernel's VmHWM, reset before each, or the highest 20 ms sample), against its idle RSS, with
 * the target peak <= 256 MiB. Each round reads the document, then runs each query once;
 * `runs` rounds, or up to three times as many while the reads' times are unsettled
 * (settleRounds). The idle RSS is one reading, taken before the first query: after one, the
 * server's heap is no longer idle, and a reading again would measure that instead.
 */
export async function jsonPathScenarios(runs: number): Promise<BenchResult[]> {
  const dir = await mkdtemp(join(tmpdir(), "spillway-bench-json-"));
  const server = await spawnSpillway(["--data-dir", join(dir, "store")]);
  try {
    const path = join(dir, "doc.json");
    const size = await writeDocument(path, 1024 * MiB);
    const client = createSpillwayClient({ baseUrl: server.url });
    await client.offload(
      { tenant: "dev", runId, callId: "doc" },
      createReadStream(path, { highWaterMark: MiB }),
      { contentType: "application/json" },
    );
    await rm(path);
    await sleep(500);
    const idle = [await statusMiB(server.pid, "VmRSS")];
    const peaks: number[] = [];
    /** Times one query while tracking the server's peak RSS. */
    const metered = async (text: string): Promise<number> => {
      const { result, peakMiB } = await meterPeakRss(server.pid, () =>
        timeSeconds(() => query(client, text)),
      );
      peaks.push(peakMiB);
      return result;
    };
    const mib = size / MiB;
    const rows: BenchResult[] = [];
    const timed = await settleRounds(
      runs,
      async () => ({
        read: await timeSeconds(() => fullRead(client, size)),
        filter: await metered(filterQuery),
        descendant: await metered(descendantQuery),
      }),
      "read",
    );
    for (const [name, seconds] of [
      ["jsonpath_filter_1gib", timed.filter],
      ["jsonpath_descendant_1gib", timed.descendant],
    ] as const) {
      process.stderr.write(`bench: ${name}: ${seconds.map((s) => s.toFixed(1)).join(", ")} s\n`);
      rows.push(
        ratioResult({
          name,
          unit: "MiB/s",
          baseline: "a bytes-mode read of the same document",
          spillway: seconds.map((s) => mib / s),
          baselineSamples: timed.read.map((s) => mib / s),
          ratioOf: (value, baseline) => value / baseline,
          target: "ratio >= 0.02 (a tokenized scan, not a copy)",
          meets: (ratio) => ratio >= 0.02,
        }),
      );
    }
    rows.push(
      ratioResult({
        name: "jsonpath_peak_rss_1gib",
        unit: "MiB",
        baseline: "the same server's idle RSS before the queries",
        spillway: peaks,
        baselineSamples: idle,
        ratioOf: (value, baseline) => value / baseline,
        target: "peak <= 256 MiB",
        meets: (_ratio, value) => value <= 256,
        rounds: timed.read.length,
      }),
    );
    return rows;
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
