import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import { createTurnQueue } from "../turn-queue.js";
import { type BlockScanTask, scanBlocks } from "./block-scan.js";
import { findFolded } from "./folded-text.js";

/** ScanPool runs block scans (block-scan.ts) of local files on threads of their own. */
export interface ScanPool {
  /** The threads it scans on: how many tasks one scan is best cut into. */
  readonly threads: number;
  /**
   * Scans each task on a thread, in order, reading the file open as descriptor `fd` (which
   * must stay open until every answer settles): per task, the blocks found, or undefined when
   * the task gave up or failed (a read error, a thread that died). Tasks wait while every
   * thread is busy, taking turns: owners in turn, and each owner's scans in turn, so one
   * owner's many scans hold the threads no longer between another owner's tasks than one
   * scan would.
   */
  scan(
    fd: number,
    tasks: readonly BlockScanTask[],
    progress: Int32Array,
    owner: string,
  ): Promise<number[] | undefined>[];
  /** Ends the threads; scans still queued or running resolve undefined. */
  close(): Promise<void>;
}

/**
 * The code each thread runs: scanBlocks itself (handed findFolded, from its source too),
 * reading with positioned reads, testing lines with RE2 (the server's own copy, by its resolved
 * path) when a task names an expression, and running it over spans of lines when it may.
 */
const workerSource = `
const { parentPort } = require("node:worker_threads");
const { readSync } = require("node:fs");
const RE2 = require(${JSON.stringify(createRequire(import.meta.url).resolve("re2"))});
const findFolded = (${findFolded.toString()});
const scanBlocks = (${scanBlocks.toString()});
let compiled;
const compile = (line) => {
  const same = compiled?.source === line.source && compiled?.flags === line.flags;
  if (!same || compiled.chunked !== line.chunked) {
    const lines = line.chunked === undefined ? undefined : new RE2(line.chunked, "gm" + line.flags);
    compiled = { ...line, expression: new RE2(line.source, line.flags), lines };
  }
  const { expression, lines } = compiled;
  const findMatch = lines === undefined ? undefined : (text, at) => {
    lines.lastIndex = at;
    return lines.exec(text)?.index ?? -1;
  };
  return { lineMatches: (text) => expression.test(text), findMatch };
};
parentPort.on("message", ({ fd, task, progress }) => {
  const read = (into, length, position) => {
    let got = 0;
    while (got < length) {
      const n = readSync(fd, into, got, length - got, position + got);
      if (n === 0) break;
      got += n;
    }
    return got;
  };
  try {
    const tests = task.line === undefined ? {} : compile(task.line);
    const blocks = scanBlocks(task, read, progress, findFolded, tests.lineMatches, tests.findMatch);
    parentPort.postMessage({ blocks });
  } catch (err) {
    parentPort.postMessage({ error: String(err) });
  }
});
`;

interface Job {
  readonly fd: number;
  readonly task: BlockScanTask;
  readonly progress: Int32Array;
  readonly done: (blocks: number[] | undefined) => void;
}

interface Thread {
  readonly worker: Worker;
  job: Job | undefined;
}

/**
 * createScanPool returns a pool of `threads` threads, started on first use. Scans take turns
 * by owner (the server's owners are tenants): a free thread serves the owner after the one it
 * last served, and of that owner's scans the one after the scan it last ran, one task each
 * time. So a short scan queued behind long ones waits for one task of each other owner, not
 * for all of their tasks, however many scans an owner has started. Idle threads do not keep
 * the process alive; a thread that dies fails its task (undefined) and is replaced on the
 * next scan.
 */
export function createScanPool(threads: number): ScanPool {
  const live: Thread[] = [];
  // Each scan's tasks not yet started, scans by owner.
  const scans = createTurnQueue<Job[]>();
  let closed = false;

  const nextJob = (): Job | undefined => {
    const turn = scans.shift();
    if (turn === undefined) return undefined;
    const job = turn.item.shift();
    if (turn.item.length > 0) scans.push(turn.owner, turn.item);
    return job;
  };

  const start = (): Thread => {
    const thread: Thread = { worker: new Worker(workerSource, { eval: true }), job: undefined };
    thread.worker.unref();
    thread.worker.on("message", (reply: { blocks?: number[] | null; error?: string }) => {
      const job = thread.job;
      thread.job = undefined;
      thread.worker.unref();
      job?.done(reply.blocks ?? undefined);
      next();
    });
    const fail = () => {
      live.splice(live.indexOf(thread), 1);
      thread.job?.done(undefined);
      thread.job = undefined;
      next();
    };
    thread.worker.on("error", fail);
    thread.worker.on("exit", () => {
      if (live.includes(thread)) fail();
    });
    live.push(thread);
    return thread;
  };

  const next = (): void => {
    while (!scans.isEmpty() && !closed) {
      const thread =
        live.find((t) => t.job === undefined) ?? (live.length < threads ? start() : undefined);
      if (thread === undefined) return;
      const job = nextJob();
      if (job === undefined) return;
      thread.job = job;
      // A thread at work keeps the process alive until it answers.
      thread.worker.ref();
      thread.worker.postMessage({ fd: job.fd, task: job.task, progress: job.progress });
    }
  };

  return {
    threads,
    scan(fd, tasks, progress, owner) {
      if (closed) return tasks.map(() => Promise.resolve(undefined));
      const jobs: Job[] = [];
      const results = tasks.map(
        (task) =>
          new Promise<number[] | undefined>((done) => {
            jobs.push({ fd, task, progress, done });
          }),
      );
      if (jobs.length > 0) scans.push(owner, jobs);
      next();
      return results;
    },
    async close() {
      closed = true;
      for (const job of scans.clear().flat()) job.done(undefined);
      await Promise.all(
        live.splice(0).map((thread) => {
          thread.job?.done(undefined);
          thread.job = undefined;
          return thread.worker.terminate();
        }),
      );
    },
  };
}

let shared: ScanPool | undefined;

/** The process's scan pool: one thread per core the process may use, started on first use. */
export function sharedScanPool(): ScanPool {
  shared ??= createScanPool(availableParallelism());
  return shared;
}
