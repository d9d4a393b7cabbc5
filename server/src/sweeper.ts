import { setTimeout as sleep, setImmediate as yieldToEvents } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { readObject } from "./backends/body.js";
import { signalOption } from "./backends/call-options.js";
import { allowFanOut } from "./call-fan-out.js";
import { finishStaleMerge } from "./merge-run.js";
import { grpcCode, type Metrics } from "./metrics.js";
import { isExpired, isSameCommit, type StoredRecord } from "./record.js";
import type { SpillwayCore } from "./service.js";

/** Splits a key into its run's prefix (as stored) and the rest. */
const runPrefixOf = /^(t\/[^/]+\/r\/[^/]+\/)(.*)$/;
/** Keys one page of the sweep's walk lists. */
const pageKeys = 1000;
/** Record reads (and deletes) of one page run at most this many at once. */
const readsInFlight = 8;
/** The share of its time a scheduled sweep spends working, at most (see SweeperOptions.pace). */
const defaultWorkShare = 0.1;

/** SweepReport counts what one sweep removed, and the entries it refused to touch. */
export interface SweepReport {
  readonly expiredRuns: number;
  readonly expiredRecords: number;
  readonly orphanBlobs: number;
  /** Temp files and incomplete multipart uploads removed by the backend's sweepLeftovers. */
  readonly leftovers: number;
  /** Entries the sweep could not read or remove (a symlink, a corrupt record), skipped. */
  readonly refused: number;
  /**
   * Merges a crash cut short that no MergeRun finished within 10 minutes, rolled forward (or
   * taken back) by this sweep (docs/design/merge-run.md).
   */
  readonly staleMerges: number;
}

/** The log calls the sweeper makes (pino's signature). */
export interface SweepLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** SweeperOptions configure createSweeper. */
export interface SweeperOptions {
  /** Time between the starts of two scheduled sweeps. */
  readonly intervalMs: number;
  /** Age before an orphan blob or a leftover of an interrupted write is removed. */
  readonly orphanAgeMs: number;
  /** Where refused entries, skipped sweeps and failed sweeps are logged. */
  readonly log?: SweepLogger;
  /** Counts refused entries and skipped sweeps (spillway_sweep_*). */
  readonly metrics?: Pick<Metrics, "sweepRefused" | "sweepsSkipped">;
  /**
   * How scheduled sweeps pace themselves: after each step (a page of the walk, its listing and
   * its reads; a page of the orphan blobs' checks; each stale merge finished and expired run
   * deleted; the backend's leftovers pass) a scheduled sweep waits until the time that step
   * took is at most `workShare` of the time it has taken with the wait (default 0.1), so that
   * a large store costs a serving process a bounded share of its time instead of whole seconds
   * at once every interval. `clock` (monotonic ms,
   * default `performance.now`) and `wait` (default a timer that the sweep's abort ends) are for
   * tests. sweepOnce does not pace.
   */
  readonly pace?: {
    readonly workShare?: number;
    readonly clock?: () => number;
    readonly wait?: (ms: number, signal: AbortSignal) => Promise<void>;
  };
}

/** Sweeper deletes data that expiry or crashes left behind. */
export interface Sweeper {
  /**
   * Runs one full sweep now, as fast as it can, unless one is already running: then it resolves
   * undefined at once and counts a skipped sweep. Aborting `signal` (or stop()) ends it early
   * with CANCELED.
   */
  sweepOnce(signal?: AbortSignal): Promise<SweepReport | undefined>;
  /**
   * Sweeps until stop(), each sweep paced (SweeperOptions.pace) and starting intervalMs after
   * the one before it started, or as it ends when it took longer.
   */
  start(): void;
  /** Stops the timer, cancels a sweep under way and resolves once it has let go. */
  stop(): Promise<void>;
}

/**
 * createSweeper removes expired runs and records (already invisible to readers) and blobs
 * that no record refers to once they are older than orphanAgeMs (uploads cut off by a crash
 * before their commit), then asks the backend to sweep what interrupted writes left behind
 * (`sweepLeftovers`: temp files, incomplete multipart uploads) older than orphanAgeMs, when the
 * backend has such leftovers. Blobs of a run that forks still refer to are left alone. Merges
 * a crash cut short more than 10 minutes ago are finished (finishStaleMerge).
 *
 * Guarantees: one entry it cannot read or remove (a symlink under a filesystem root, a corrupt
 * record, a failing delete) is logged, counted (`refused`, spillway_sweep_refused_total) and
 * skipped, and the sweep goes on with the rest; a blob is never removed while a record that
 * may refer to it could not be read. Sweeps never overlap. A sweep yields to other work
 * between pages and reads a few records at a time, and stops within a backend call of an abort
 * or stop().
 */
export function createSweeper(core: SpillwayCore, opts: SweeperOptions): Sweeper {
  const { backend, runs } = core;
  const workShare = opts.pace?.workShare ?? defaultWorkShare;
  if (!(workShare > 0 && workShare <= 1)) {
    throw new ConnectError(`sweep work share must be in (0, 1], got ${workShare}`, Code.Internal);
  }
  const clock = opts.pace?.clock ?? (() => performance.now());
  const wait = opts.pace?.wait ?? ((ms, signal) => sleep(ms, undefined, { signal }));

  const sweep = async (signal: AbortSignal, paced: boolean): Promise<SweepReport> => {
    const nowMs = core.now();
    let expiredRuns = 0;
    let expiredRecords = 0;
    let orphanBlobs = 0;
    let refused = 0;
    let staleMerges = 0;
    const refuse = (key: string, err: unknown) => {
      // A cancelled sweep is not a refusal: let it end the sweep.
      if (signal.aborted) throw err;
      refused++;
      const reason = ConnectError.from(err);
      opts.metrics?.sweepRefused.inc({ grpc_code: grpcCode(reason.code) });
      opts.log?.warn(
        { key, code: grpcCode(reason.code), err: reason.message },
        "sweep skipped an entry it could not read or remove",
      );
    };
    const opt = signalOption(signal);
    /**
     * Paced, waits until the work done since `since` is at most workShare of the time taken
     * since then: after each page of the walk and of the orphan pass, each finished merge and
     * deleted run, and the leftovers pass.
     */
    const rest = async (since: number): Promise<void> => {
      if (paced && workShare < 1) {
        await wait(((clock() - since) * (1 - workShare)) / workShare, signal);
      }
    };
    // Run prefix (as stored) -> facts gathered while walking the keys in order.
    const blobsByRun = new Map<string, string[]>();
    const referenced = new Set<string>();
    // Runs whose blobs must stay: forks refer to them, or a record could not be read.
    const keepBlobs = new Set<string>();
    const expiredRunIds: { tenant: string; runId: string }[] = [];
    // Runs some of whose outputs this sweep removed: one left empty loses its TTL too.
    const emptied = new Map<string, { tenant: string; runId: string }>();
    // Merge intents, finished once the walk is done (finishStaleMerge reads and checks each).
    const intentKeys: string[] = [];

    const visitRecord = async (run: string, key: string) => {
      let record: StoredRecord | undefined;
      try {
        record = await core.registry.readAt(key, signal);
      } catch (err) {
        keepBlobs.add(run);
        refuse(key, err);
        return;
      }
      if (record === undefined) return;
      if (!isExpired(record, nowMs)) {
        if (record.blob !== undefined) {
          referenced.add(record.blob.key);
          if (record.blob.indexKey !== undefined) referenced.add(record.blob.indexKey);
          if (record.blob.jsonIndexKey !== undefined) referenced.add(record.blob.jsonIndexKey);
        }
        return;
      }
      try {
        // Read again just before the delete: an offload of the same key replaces an expired
        // record (created anew), and the record read during the walk may be stale by now; a
        // delete by key would take the acknowledged one with it.
        const current = await core.registry.readAt(key, signal);
        if (current === undefined || !isExpired(current, nowMs) || !isSameCommit(current, record)) {
          return;
        }
        await backend.delete(key, opt);
        expiredRecords++;
        // The run whose registry held it: a merged record's is the run it was merged into.
        const heldBy = record.merge?.into ?? record.runId;
        emptied.set(`${record.tenant}\0${heldBy}`, { tenant: record.tenant, runId: heldBy });
        // Fork markers sort before records, so a run with forks is already known here.
        if (record.blob?.key.startsWith(run) === true && !keepBlobs.has(run)) {
          await backend.delete(record.blob.key, opt);
          if (record.blob.indexKey !== undefined) await backend.delete(record.blob.indexKey, opt);
          if (record.blob.jsonIndexKey !== undefined) {
            await backend.delete(record.blob.jsonIndexKey, opt);
          }
        }
      } catch (err) {
        refuse(key, err);
      }
    };

    const visitTtl = async (key: string) => {
      try {
        const bytes = await readObject(backend, key, 64 * 1024, signal);
        const ttl = (bytes === undefined ? undefined : JSON.parse(Buffer.from(bytes).toString())) as
          | { expiresMs?: number; tenant?: string; runId?: string }
          | undefined;
        if (
          typeof ttl?.expiresMs === "number" &&
          ttl.expiresMs <= nowMs &&
          typeof ttl.tenant === "string" &&
          typeof ttl.runId === "string"
        ) {
          expiredRunIds.push({ tenant: ttl.tenant, runId: ttl.runId });
        }
      } catch (err) {
        refuse(key, err);
      }
    };

    let startAfter: string | undefined;
    for (;;) {
      const pageStart = clock();
      const page = await backend.list("t/", {
        limit: pageKeys,
        ...(startAfter === undefined ? {} : { startAfter }),
        ...opt,
        onRefused: (key, reason) => {
          // What cannot be listed in a run may be a record that refers to its blobs.
          const run = runPrefixOf.exec(key)?.[1];
          if (run !== undefined) keepBlobs.add(run);
          refuse(key, reason);
        },
      });
      const visits: (() => Promise<void>)[] = [];
      for (const key of page.keys) {
        const match = runPrefixOf.exec(key);
        if (match?.[1] === undefined || match[2] === undefined) continue;
        const [run, rest] = [match[1], match[2]];
        if (rest === "ttl") {
          visits.push(() => visitTtl(key));
        } else if (rest.startsWith("h/")) {
          visits.push(() => visitRecord(run, key));
        } else if (rest.startsWith("b/")) {
          const list = blobsByRun.get(run) ?? [];
          list.push(key);
          blobsByRun.set(run, list);
        } else if (rest.startsWith("m/i/")) {
          intentKeys.push(key);
        } else if (rest.startsWith("f/") || rest === "deleted") {
          keepBlobs.add(run);
        }
      }
      await inBatches(visits, signal);
      const more = page.truncated && page.keys.length > 0;
      startAfter = page.keys.at(-1);
      await rest(pageStart);
      if (!more) break;
    }

    for (const key of intentKeys) {
      const started = clock();
      try {
        if (await finishStaleMerge(core, key, signal)) staleMerges++;
      } catch (err) {
        refuse(key, err);
      }
      await rest(started);
    }
    for (const { tenant, runId } of emptied.values()) {
      try {
        await runs.dropTtlIfGone(tenant, runId, signal);
      } catch (err) {
        refuse(`run ${tenant}/${runId}`, err);
      }
    }
    for (const { tenant, runId } of expiredRunIds) {
      const started = clock();
      try {
        // Read again: a SetRunTtl since the walk may have moved the expiry on (and answered
        // with the new one), or a DeleteRun removed the run and a new one took its id.
        const expires = await runs.expiresMs(tenant, runId, signal);
        if (expires !== undefined && expires <= nowMs) {
          await runs.delete(tenant, runId, signal);
          expiredRuns++;
        }
      } catch (err) {
        refuse(`run ${tenant}/${runId}`, err);
      }
      await rest(started);
    }
    // Forked runs' blobs are referenced from other runs' registries; runs.delete owns them.
    const candidates = [...blobsByRun]
      .filter(([run]) => !keepBlobs.has(run))
      .flatMap(([, blobs]) => blobs.filter((key) => !referenced.has(key)));
    for (let i = 0; i < candidates.length; i += pageKeys) {
      const started = clock();
      await inBatches(
        candidates.slice(i, i + pageKeys).map((key) => async () => {
          try {
            const info = await backend.head(key, opt);
            if (info === undefined || nowMs - info.modifiedMs < opts.orphanAgeMs) return;
            await backend.delete(key, opt);
            orphanBlobs++;
          } catch (err) {
            refuse(key, err);
          }
        }),
        signal,
      );
      await rest(started);
    }
    const leftoversStarted = clock();
    const leftovers =
      backend.sweepLeftovers === undefined
        ? 0
        : await backend.sweepLeftovers(opts.orphanAgeMs, opt);
    await rest(leftoversStarted);
    return { expiredRuns, expiredRecords, orphanBlobs, leftovers, refused, staleMerges };
  };

  let timer: NodeJS.Timeout | undefined;
  // Each start() begins a new chain of scheduled sweeps; a sweep of an earlier one, still
  // ending after a stop() and a start(), schedules nothing.
  let chain = 0;
  let started = false;
  let running: { done: Promise<unknown>; abort: AbortController } | undefined;

  const runSweep = async (
    paced: boolean,
    signal?: AbortSignal,
  ): Promise<SweepReport | undefined> => {
    if (running !== undefined) {
      opts.metrics?.sweepsSkipped.inc();
      opts.log?.warn({}, "sweep skipped: the previous sweep is still running");
      return undefined;
    }
    const abort = new AbortController();
    allowFanOut(abort.signal);
    const onAbort = () => abort.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted === true) abort.abort(signal.reason);
    opts.log?.debug({}, "sweep started");
    const done = sweep(abort.signal, paced);
    running = { done: done.catch(() => undefined), abort };
    try {
      const report = await done;
      opts.log?.debug({ report }, "sweep finished");
      return report;
    } catch (err) {
      if (!abort.signal.aborted) throw err;
      throw new ConnectError("the sweep was cancelled", Code.Canceled, undefined, undefined, err);
    } finally {
      running = undefined;
      signal?.removeEventListener("abort", onAbort);
    }
  };

  const schedule = (delayMs: number, ofChain: number) => {
    timer = setTimeout(() => {
      timer = undefined;
      const startedAt = clock();
      runSweep(true)
        .catch((err: unknown) => {
          if (!(err instanceof ConnectError && err.code === Code.Canceled)) {
            opts.log?.error({ err }, "sweep failed");
          }
        })
        .finally(() => {
          if (started && ofChain === chain) {
            schedule(Math.max(0, startedAt + opts.intervalMs - clock()), ofChain);
          }
        });
    }, delayMs);
    timer.unref();
  };

  return {
    sweepOnce: (signal) => runSweep(false, signal),
    start() {
      if (started) return;
      started = true;
      chain++;
      schedule(opts.intervalMs, chain);
    },
    async stop() {
      started = false;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      const current = running;
      if (current === undefined) return;
      current.abort.abort();
      await current.done;
    },
  };
}

/**
 * Runs tasks, at most readsInFlight at a time, letting other work on the event loop go first
 * after each batch: reads of small objects are synchronous on the filesystem, so without that
 * a page of records would hold the loop for tens of milliseconds.
 */
async function inBatches(
  tasks: readonly (() => Promise<void>)[],
  signal: AbortSignal,
): Promise<void> {
  for (let i = 0; i < tasks.length; i += readsInFlight) {
    await Promise.all(tasks.slice(i, i + readsInFlight).map((task) => task()));
    await yieldToEvents(undefined, { signal });
  }
}
