import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { withFilesystemSpillway } from "../filesystem-spillway.js";
import type { LogFile } from "../log-file.js";
import { writeMixedLogFile } from "../mixed-log-file.js";
import { type BenchResult, ratioResult } from "../result.js";
import { settleRounds, timeSeconds } from "../timing.js";

const MiB = 1024 * 1024;
/** Searches the busy tenant keeps in flight: an agent fleet fanning out over one log. */
const busySearches = 32;
/** Time for the busy tenant's searches to reach the server before the other's is timed. */
const busyLeadMs = 500;

interface Tenant {
  readonly name: string;
  readonly client: SpillwayClient;
  handle: string;
}

/** Searches the tenant's copy of the log for the rare expression and checks every line was found. */
async function search(tenant: Tenant, log: LogFile): Promise<void> {
  const w = await tenant.client.readToolOutput({
    runId: "fair",
    handle: tenant.handle,
    window: { case: "search", value: { pattern: log.rareRegex, regex: true, maxMatches: 100 } },
  });
  if (w.trailer?.totalMatches !== BigInt(log.rareLines)) {
    throw new Error(`search found ${w.trailer?.totalMatches}, expected ${log.rareLines}`);
  }
}

/**
 * searchFairnessScenario measures `search_beside_busy_tenant_256mib`: one tenant's search of
 * the 256 MiB mixed log (its expression, rare matches: the search runs on the scan threads)
 * while another tenant keeps 32 searches of its own copy in flight, against the same search
 * with the other tenant idle, in the same round. Both tenants hold tokens of one server with
 * the defaults (a worker a core). The ratio is the alone time over the beside time; target
 * >= 0.2: the scan threads take turns by tenant, so the search waits one task of the busy
 * tenant per task of its own, not one of each of its 32 searches.
 */
export async function searchFairnessScenario(runs: number): Promise<BenchResult> {
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
      "fair",
      async ({ dir, server }) => {
        const log = await writeMixedLogFile(join(dir, "log.txt"), 256 * MiB);
        const tenant = (name: string, token: string): Tenant => ({
          name,
          client: createSpillwayClient({ baseUrl: server.url, token }),
          handle: "",
        });
        const busy = tenant("busy", tokens.busy);
        const other = tenant("other", tokens.other);
        for (const t of [busy, other]) {
          const attachment = await t.client.offload(
            { tenant: t.name, runId: "fair", callId: "log" },
            createReadStream(log.path, { highWaterMark: MiB }),
            { contentType: "text/plain" },
          );
          t.handle = attachment.handle;
        }
        const round = async () => {
          const alone = 1000 * (await timeSeconds(() => search(other, log)));
          let stop = false;
          const loops = Array.from({ length: busySearches }, async () => {
            while (!stop) await search(busy, log);
          });
          await new Promise((resolve) => setTimeout(resolve, busyLeadMs));
          const beside = 1000 * (await timeSeconds(() => search(other, log)));
          stop = true;
          await Promise.all(loops);
          return { alone, beside };
        };
        await round();
        const timed = await settleRounds(runs, round, "alone");
        return ratioResult({
          name: "search_beside_busy_tenant_256mib",
          unit: "ms",
          baseline: "the same search with the other tenant idle",
          spillway: timed.beside,
          baselineSamples: timed.alone,
          ratioOf: (value, baseline) => baseline / value,
          target: "ratio >= 0.2",
          meets: (ratio) => ratio >= 0.2,
        });
      },
      ["--token-file", tokenFile],
    );
  } finally {
    await rm(tokenDir, { recursive: true, force: true });
  }
}
