import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { withFilesystemSpillway } from "../filesystem-spillway.js";
import { jsonDocumentChunks } from "../json-document.js";
import type { LogFile } from "../log-file.js";
import { writeMixedLogFile } from "../mixed-log-file.js";
import { type BenchResult, median, ratioResult } from "../result.js";
import { settleRounds, timeSeconds } from "../timing.js";

const MiB = 1024 * 1024;
/** Searches the busy tenant keeps in flight: an agent fleet fanning out over one log. */
const busySearches = 32;
/** JSONPath windows the busy tenant keeps in flight over its document. */
const busyQueries = 8;
/** Time for the busy tenant's calls to reach the server before the other's are timed. */
const busyLeadMs = 500;
/** The other tenant's windows a round, back to back: the round's figure is their median. */
const windowsARound = 50;
const filterQuery = "$.items[?@.status == 'failed' && @.score > 999.9].id";

interface Tenant {
  readonly name: string;
  readonly client: SpillwayClient;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One round: `timed` (milliseconds) alone, then again while `count` loops of `busyCall` run,
 * started busyLeadMs before; the loops end (their calls in flight finished) before it returns.
 */
async function aloneAndBeside(
  timed: () => Promise<number>,
  count: number,
  busyCall: () => Promise<unknown>,
): Promise<{ alone: number; beside: number }> {
  const alone = await timed();
  let stopped = false;
  const loops = Array.from({ length: count }, async () => {
    while (!stopped) await busyCall();
  });
  await sleep(busyLeadMs);
  const beside = await timed();
  stopped = true;
  await Promise.all(loops);
  return { alone, beside };
}

/** A row whose ratio is the other tenant's time alone over its time beside the busy one. */
function besideRow(
  name: string,
  what: string,
  samples: { alone: number[]; beside: number[] },
  minRatio: number,
): BenchResult {
  return ratioResult({
    name,
    unit: "ms",
    baseline: `the same ${what} with the other tenant idle`,
    spillway: samples.beside,
    baselineSamples: samples.alone,
    ratioOf: (value, baseline) => baseline / value,
    target: `ratio >= ${minRatio}`,
    meets: (ratio) => ratio >= minRatio,
  });
}

/**
 * busyTenantScenarios measures what one tenant's load costs another's calls on one server
 * with the defaults (a worker a core), both tenants with tokens; each round times the other
 * tenant's call alone, then beside the busy tenant's calls, which start `busyLeadMs` before:
 *
 * - `search_beside_busy_tenant_256mib`: a search of the other tenant's copy of a 256 MiB mixed
 *   log (its expression, 50 matches: the search runs on the scan threads) beside 32 searches of
 *   the busy tenant's copy. Target alone / beside >= 0.2: with a worker a core a quarter of the
 *   machine is the search's fair part, 4 times its time alone
 *   ([design/admission-fairness.md](../../docs/design/admission-fairness.md)).
 * - `window_beside_busy_jsonpath_32mib`: the median of 50 back-to-back 100-line windows of a
 *   small output, beside 8 JSONPath windows over the busy tenant's 32 MiB JSON document, which
 *   tokenize it on the event loop. Target alone / beside >= 0.1: the loop runs other calls
 *   between slices of 2 ms ([design/cpu-turns.md](../../docs/design/cpu-turns.md)).
 */
export async function busyTenantScenarios(runs: number): Promise<BenchResult[]> {
  const tokens = { busy: "bench-busy-tenant-token", other: "bench-other-tenant-token" };
  const line = (token: string, tenant: string) =>
    `${createHash("sha256").update(token).digest("hex")} ${tenant}\n`;
  const tokenDir = await mkdtemp(join(tmpdir(), "spillway-bench-tokens-"));
  const tokenFile = join(tokenDir, "tokens");
  await writeFile(tokenFile, line(tokens.busy, "busy") + line(tokens.other, "other"), {
    mode: 0o600,
  });
  try {
    return await withFilesystemSpillway(
      "busy",
      async ({ dir, server }) => {
        const tenant = (name: string, token: string): Tenant => ({
          name,
          client: createSpillwayClient({ baseUrl: server.url, token }),
        });
        const busy = tenant("busy", tokens.busy);
        const other = tenant("other", tokens.other);
        const offload = async (
          t: Tenant,
          callId: string,
          data: Parameters<SpillwayClient["offload"]>[1],
          contentType: string,
        ) =>
          (await t.client.offload({ tenant: t.name, runId: "busy", callId }, data, { contentType }))
            .handle;
        const read = (
          t: Tenant,
          handle: string,
          window: Parameters<SpillwayClient["readToolOutput"]>[0]["window"],
        ) => t.client.readToolOutput({ runId: "busy", handle, renderedOnly: true, window });

        const log = await writeMixedLogFile(join(dir, "log.txt"), 256 * MiB);
        const logOf = async (t: Tenant) =>
          offload(t, "log", createReadStream(log.path, { highWaterMark: MiB }), "text/plain");
        const logs = { busy: await logOf(busy), other: await logOf(other) };
        const search = async (t: Tenant, handle: string, found: LogFile) => {
          const w = await read(t, handle, {
            case: "search",
            value: { pattern: found.rareRegex, regex: true, maxMatches: 100 },
          });
          if (w.trailer?.totalMatches !== BigInt(found.rareLines)) {
            throw new Error(`search found ${w.trailer?.totalMatches}, expected ${found.rareLines}`);
          }
        };
        const searchRound = () =>
          aloneAndBeside(
            async () => 1000 * (await timeSeconds(() => search(other, logs.other, log))),
            busySearches,
            () => search(busy, logs.busy, log),
          );
        await searchRound();
        const searches = await settleRounds(runs, searchRound, "alone");

        const document = await offload(
          busy,
          "document",
          Buffer.concat([...jsonDocumentChunks(32 * MiB)]),
          "application/json",
        );
        const text = Array.from({ length: 100_000 }, (_, k) => `line ${k} of a small output`);
        const small = await offload(other, "small", `${text.join("\n")}\n`, "text/plain");
        const query = async () => {
          const w = await read(busy, document, {
            case: "jsonPath",
            value: { query: filterQuery, maxMatches: 100 },
          });
          if (w.trailer?.eof !== true) throw new Error("the JSONPath query stopped early");
        };
        const windows = async () => {
          const times: number[] = [];
          for (let k = 0; k < windowsARound; k++) {
            const offset = BigInt((k * 7919) % 99_000);
            times.push(
              1000 *
                (await timeSeconds(() =>
                  read(other, small, { case: "lines", value: { offset, limit: 100 } }),
                )),
            );
          }
          return median(times);
        };
        const windowRound = () => aloneAndBeside(windows, busyQueries, query);
        await windowRound();
        const windowTimes = await settleRounds(runs, windowRound, "alone");

        return [
          besideRow("search_beside_busy_tenant_256mib", "search", searches, 0.2),
          besideRow("window_beside_busy_jsonpath_32mib", "windows", windowTimes, 0.1),
        ];
      },
      ["--token-file", tokenFile],
    );
  } finally {
    await rm(tokenDir, { recursive: true, force: true });
  }
}
