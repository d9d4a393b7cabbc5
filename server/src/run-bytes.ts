import { Code, ConnectError } from "@connectrpc/connect";
import { truncateForMessage } from "./keys.js";
import { isExpired } from "./record.js";
import type { Registry } from "./registry.js";

/**
 * storedRunBytes returns the payload bytes a run holds: the sizes of its live records whose
 * output was offloaded to this run and kept (inline or as a blob). It reads the run's registry
 * in the backend, so every replica sees the same total without sharing state.
 *
 * Records a fork copied from another run do not count: their bytes were never stored again and
 * stay charged to the run that offloaded them. Records MergeRun brought in count: the run now
 * holds them as its own outputs. Preview-only records keep no payload, and expired
 * records are invisible and awaiting the sweeper, so neither counts. The record of `exceptHandle`
 * is left out, so an offload can ask how much room the run has besides the handle it commits.
 */
export async function storedRunBytes(
  registry: Registry,
  tenant: string,
  runId: string,
  opts: { nowMs: number; exceptHandle?: string; signal?: AbortSignal },
): Promise<number> {
  let total = 0;
  let after: string | undefined;
  do {
    const page = await registry.list(tenant, runId, {
      after,
      limit: 1000,
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
    });
    for (const record of page.records) {
      if (
        (record.runId === runId || record.merge?.into === runId) &&
        record.stored !== "preview_only" &&
        record.handle !== opts.exceptHandle &&
        !isExpired(record, opts.nowMs)
      ) {
        total += record.sizeBytes;
      }
    }
    after = page.nextAfter;
  } while (after !== undefined);
  return total;
}

/**
 * runBytesExceeded is the RESOURCE_EXHAUSTED answer for an offload that would take a run past
 * its limit; it names the run, what the run holds, the limit and where the limit comes from.
 */
export function runBytesExceeded(
  runId: string,
  held: number,
  adding: number,
  limit: number,
): ConnectError {
  return new ConnectError(
    `run "${truncateForMessage(runId)}" holds ${held} bytes; storing ${adding} more would exceed max_run_bytes ${limit}`,
    Code.ResourceExhausted,
  );
}
