import cluster, { type Worker } from "node:cluster";
import type { Logger } from "pino";

/** The environment variable that tells a `spillway serve` worker its index, 0 to count - 1. */
export const WORKER_INDEX_ENV = "SPILLWAY_WORKER_INDEX";

/** The message a worker sends its primary once it listens. */
export const LISTENING_MESSAGE = "spillway:listening";

/** The signals the primary passes on to every worker. */
const FORWARDED = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

/**
 * isFirstWorker says whether this process runs the work one process of a host does for all
 * (the sweeper): a single `spillway serve`, or the worker of index 0 of several.
 */
export function isFirstWorker(env: NodeJS.ProcessEnv = process.env): boolean {
  return !cluster.isWorker || env[WORKER_INDEX_ENV] === "0";
}

/**
 * onPrimaryGone makes a worker whose primary vanished without asking it to stop (killed
 * outright, so that its IPC channel closed) call `drain` once, and keep running while the drain
 * lasts; `drain` is then what ends the process. In a process that is no worker it does nothing.
 *
 * Without it, node:cluster ends such a worker at once: its own `disconnect` listener
 * (lib/internal/cluster/child.js, `_setupWorker`) calls `process.exit(0)` unless
 * `worker.exitedAfterDisconnect` is true, before any listener added later can start a drain.
 * Call it only once `drain` can run: a worker whose primary vanishes before then (still
 * starting, serving nothing) is ended by node:cluster as before.
 */
export function onPrimaryGone(drain: () => void): void {
  if (!cluster.isWorker) return;
  // Ahead of node:cluster's listener, which reads the flag right after this returns.
  process.prependOnceListener("disconnect", () => {
    if (cluster.worker !== undefined) cluster.worker.exitedAfterDisconnect = true;
    drain();
  });
}

/** Tells the primary, when there is one, that this worker listens. */
export function reportListening(): void {
  if (cluster.isWorker) process.send?.(LISTENING_MESSAGE);
}

/** Why the primary started a worker again: one died, or a replacement stopped before it listened. */
export type WorkerRestartReason = "died" | "failed_to_start";

/** The first wait before a failing replacement worker is tried again, and the longest. */
const firstRetryMs = 1_000;
const maxRetryMs = 30_000;

/**
 * superviseWorkers runs `count` workers, each this same `spillway serve` command line in a
 * process of its own, sharing the primary's listening sockets (`node:cluster`: the primary
 * accepts connections and hands each to a worker in turn), and supervises them:
 *
 * - SIGTERM, SIGINT and SIGHUP are passed on to every worker, which drains, stops or reloads
 *   as a single server does; once every worker has exited after SIGTERM or SIGINT, the primary
 *   exits, 0 when each exited 0 or, still starting, was ended by that signal;
 * - a worker that exits before it listens ends the start: the others are stopped and the
 *   primary exits 1 (a port in use or a bad store would otherwise fail forever);
 * - a worker that exits later, while no stop was asked for, is started again with its index;
 * - a replacement that exits before it listens (a token file or certificate broken since the
 *   start, which a reload refused and the workers running keep serving without) is started
 *   again after 1 s, then 2, 4, up to 30 s between tries, while another worker serves; with
 *   none left serving, the others are stopped and the primary exits 1.
 *
 * `onRestart` hears of each worker started again, and why.
 */
export function superviseWorkers(
  count: number,
  log: Logger,
  onRestart?: (reason: WorkerRestartReason) => void,
): void {
  const listening = new Set<Worker>();
  const live = new Set<Worker>();
  /** Indexes that have not yet listened once: the start is over when none is left. */
  const starting = new Set(Array.from({ length: count }, (_, index) => index));
  /** Each index's wait before its next try, while its replacements keep failing. */
  const backoff = new Map<number, number>();
  const retries = new Set<NodeJS.Timeout>();
  let stopping: "SIGTERM" | "SIGINT" | undefined;
  let failed = false;

  const start = (index: number) => {
    const worker = cluster.fork({ [WORKER_INDEX_ENV]: String(index) });
    live.add(worker);
    worker.on("message", (message: unknown) => {
      if (message !== LISTENING_MESSAGE) return;
      listening.add(worker);
      starting.delete(index);
      if (backoff.delete(index)) log.info({ worker: index }, "a replacement worker listens");
    });
    worker.on("exit", (code, signal) => {
      live.delete(worker);
      const started = listening.delete(worker);
      if (stopping !== undefined) {
        // A worker still starting has no handler yet: the stop's own signal ends it, cleanly.
        if (code !== 0 && signal !== stopping) failed = true;
        if (live.size === 0) process.exit(failed ? 1 : 0);
        return;
      }
      if (started) {
        log.warn({ worker: index, code, signal }, "a worker stopped; starting it again");
        onRestart?.("died");
        start(index);
        return;
      }
      if (starting.size > 0 || listening.size === 0) {
        log.error(
          { worker: index, code, signal },
          starting.size > 0
            ? "a worker stopped before it listened"
            : "a replacement worker stopped before it listened, and no worker is serving",
        );
        failed = true;
        stop("SIGINT");
        return;
      }
      const waitMs = backoff.get(index) ?? firstRetryMs;
      backoff.set(index, Math.min(2 * waitMs, maxRetryMs));
      log.error(
        { worker: index, code, signal, retryInMs: waitMs, serving: listening.size },
        "a replacement worker stopped before it listened; the others go on serving",
      );
      const retry = setTimeout(() => {
        retries.delete(retry);
        if (stopping !== undefined) return;
        onRestart?.("failed_to_start");
        start(index);
      }, waitMs);
      retries.add(retry);
    });
  };

  const stop = (signal: "SIGTERM" | "SIGINT") => {
    stopping = signal;
    for (const retry of retries) clearTimeout(retry);
    retries.clear();
    if (live.size === 0) process.exit(failed ? 1 : 0);
    for (const worker of live) worker.process.kill(signal);
  };

  for (const signal of FORWARDED) {
    process.on(signal, () => {
      if (signal === "SIGHUP") {
        for (const worker of live) worker.process.kill(signal);
      } else {
        stop(signal);
      }
    });
  }
  log.info({ workers: count }, "starting workers");
  for (let index = 0; index < count; index++) start(index);
}
