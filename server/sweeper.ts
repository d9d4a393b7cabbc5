import { readObject } from "./backends/body.js";
import { signalOption } from "./backends/call-options.js";
import { isExpired } from "./record.js";
import type { SpillwayCore } from "./service.js";

/** SweepReport counts what one sweep removed. */
export interface SweepReport {
  readonly expiredRuns: number;
  readonly expiredRecords: number;
  readonly orphanBlobs: number;
  /** Temp files and incomplete multipart uploads removed by the backend's sweepLeftovers. */
  readonly leftovers: number;
}

/** Sweeper deletes data that expiry or crashes left behind. */
export interface Sweeper {
  /** Runs one full sweep. */
  sweepOnce(signal?: AbortSignal): Promise<SweepReport>;
  /** Sweeps every intervalMs until stop(). */
  start(): void;
  /** Stops the timer and waits for a sweep under way. */
  stop(): Promise<void>;
}

/**
 * createSweeper removes expired runs and records (already invisible to readers) and blobs
 * that no record refers to once they are older than orphanAgeMs (uploads cut off by a crash
 * before their commit), then asks the backend to sweep what interrupted writes left behind
 * (`sweepLeftovers`: temp files, incomplete multipart uploads) older than orphanAgeMs, when the
 * backend has such leftovers. Blobs of a run that forks still refer to are left alone.
 */
export function createSweeper(
  core: SpillwayCore,
  opts: {
    intervalMs: number;
    orphanAgeMs: number;
    onError?: (err: unknown) => void;
  },
): Sweeper {
  const { backend, runs } = core;

  const readBytes = (key: string, signal?: AbortSignal) =>
    readObject(backend, key, 4 * 1024 * 1024, signal);

  const sweepOnce = async (signal?: AbortSignal): Promise<SweepReport> => {
    const nowMs = core.now();
    let expiredRuns = 0;
    let expiredRecords = 0;
    let orphanBlobs = 0;
    // Run prefix (as stored) -> facts gathered while walking the keys in order.
    const blobsByRun = new Map<string, string[]>();
    const referenced = new Set<string>();
    const forkedRuns = new Set<string>();
    const expiredRunIds: { tenant: string; runId: string }[] = [];

    let startAfter: string | undefined;
    for (;;) {
      const page = await backend.list("t/", {
        limit: 1000,
        ...(startAfter === undefined ? {} : { startAfter }),
        ...signalOption(signal),
      });
      for (const key of page.keys) {
        const match = /^(t\/[^/]+\/r\/[^/]+\/)(.*)$/.exec(key);
        if (match?.[1] === undefined || match[2] === undefined) continue;
        const [run, rest] = [match[1], match[2]];
        if (rest === "ttl") {
          const bytes = await readBytes(key, signal);
          const ttl = (
            bytes === undefined ? undefined : JSON.parse(Buffer.from(bytes).toString())
          ) as { expiresMs?: number; tenant?: string; runId?: string } | undefined;
          if (
            typeof ttl?.expiresMs === "number" &&
            ttl.expiresMs <= nowMs &&
            typeof ttl.tenant === "string" &&
            typeof ttl.runId === "string"
          ) {
            expiredRunIds.push({ tenant: ttl.tenant, runId: ttl.runId });
          }
        } else if (rest.startsWith("h/")) {
          const record = await core.registry.readAt(key, signal);
          if (record === undefined) continue;
          if (isExpired(record, nowMs)) {
            const opt = signalOption(signal);
            await backend.delete(key, opt);
            expiredRecords++;
            // Fork markers sort before records, so a run with forks is already known here.
            if (record.blob?.key.startsWith(run) === true && !forkedRuns.has(run)) {
              await backend.delete(record.blob.key, opt);
              if (record.blob.indexKey !== undefined)
                await backend.delete(record.blob.indexKey, opt);
            }
          } else if (record.blob !== undefined) {
            referenced.add(record.blob.key);
            if (record.blob.indexKey !== undefined) referenced.add(record.blob.indexKey);
          }
        } else if (rest.startsWith("b/")) {
          const list = blobsByRun.get(run) ?? [];
          list.push(key);
          blobsByRun.set(run, list);
        } else if (rest.startsWith("f/") || rest === "deleted") {
          forkedRuns.add(run);
        }
      }
      if (!page.truncated || page.keys.length === 0) break;
      startAfter = page.keys.at(-1);
    }

    for (const { tenant, runId } of expiredRunIds) {
      await runs.delete(tenant, runId, signal);
      expiredRuns++;
    }
    for (const [run, blobs] of blobsByRun) {
      // Forked runs' blobs are referenced from other runs' registries; runs.delete owns them.
      if (forkedRuns.has(run)) continue;
      for (const key of blobs) {
        if (referenced.has(key)) continue;
        const info = await backend.head(key, signalOption(signal));
        if (info === undefined || nowMs - info.modifiedMs < opts.orphanAgeMs) continue;
        await backend.delete(key, signalOption(signal));
        orphanBlobs++;
      }
    }
    const leftovers =
      backend.sweepLeftovers === undefined
        ? 0
        : await backend.sweepLeftovers(opts.orphanAgeMs, signalOption(signal));
    return { expiredRuns, expiredRecords, orphanBlobs, leftovers };
  };

  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  return {
    sweepOnce,
    start() {
      timer ??= setInterval(() => {
        running = sweepOnce().catch((err: unknown) => opts.onError?.(err));
      }, opts.intervalMs);
      timer.unref();
    },
    async stop() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      await running;
    },
  };
}
