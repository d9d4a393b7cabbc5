import { createRequire } from "node:module";
import { setPriority } from "node:os";
import { Worker } from "node:worker_threads";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * What a RegexThread's test may answer: the line matches or not, or it took longer than its
 * budget (the thread is then given up and the caller refuses the pattern for this output).
 */
export type RegexThreadVerdict = "match" | "no match" | "over budget";

/** RegexThread runs one RE2 test at a time on a thread of its own, waited for with a budget. */
export interface RegexThread {
  /**
   * Tests `text` against the RE2 expression `source` with `flags` on the thread, blocking the
   * calling thread until it answers or `budgetMs` pass. Over budget, the thread is terminated
   * (its native test runs on to its end, off the event loop) and the next test starts another.
   * RESOURCE_EXHAUSTED while `maxStuckThreads` given-up threads have not yet ended.
   */
  test(source: string, flags: string, text: Uint8Array, budgetMs: number): RegexThreadVerdict;
}

/** Threads given up over budget that may still be running before tests are refused. */
const maxStuckThreads = 2;
/** How long a new thread may take to load RE2 before a test is refused. */
const startBudgetMs = 10_000;

/**
 * Slots of the shared state: the last finished test's number, its result, the thread's
 * readiness, and its Linux thread id.
 */
const doneSlot = 0;
const resultSlot = 1;
const readySlot = 2;
const threadIdSlot = 3;
/** The nice value a thread given up is left to finish at: it runs only on idle cores. */
const givenUpNice = 19;

const workerSource = `
const { parentPort, workerData } = require("node:worker_threads");
const RE2 = require(${JSON.stringify(createRequire(import.meta.url).resolve("re2"))});
const state = new Int32Array(workerData);
try {
  // "<pid>/task/<tid>": Linux's nice value is per thread, so the one given up can be lowered.
  const tid = Number(require("node:fs").readlinkSync("/proc/thread-self").split("/").pop());
  if (Number.isSafeInteger(tid)) Atomics.store(state, ${threadIdSlot}, tid);
} catch {}
let compiled;
parentPort.on("message", ({ seq, source, flags, text }) => {
  let result = 2;
  try {
    if (compiled === undefined || compiled.source !== source || compiled.flags !== flags) {
      compiled = { source, flags, expression: new RE2(source, flags) };
    }
    result = compiled.expression.test(Buffer.from(text.buffer, text.byteOffset, text.byteLength)) ? 1 : 0;
  } catch {}
  Atomics.store(state, ${resultSlot}, result);
  Atomics.store(state, ${doneSlot}, seq);
  Atomics.notify(state, ${doneSlot});
});
Atomics.store(state, ${readySlot}, 1);
Atomics.notify(state, ${readySlot});
`;

interface Running {
  readonly worker: Worker;
  readonly state: Int32Array;
  seq: number;
}

/**
 * createRegexThread returns a RegexThread whose thread starts at its first test. The thread
 * never keeps the process alive.
 */
export function createRegexThread(): RegexThread {
  let running: Running | undefined;
  let stuck = 0;

  const start = (): Running => {
    if (stuck >= maxStuckThreads) {
      throw new ConnectError(
        "the server is still finishing earlier searches whose pattern was too slow on their output; retry later",
        Code.ResourceExhausted,
      );
    }
    const state = new Int32Array(new SharedArrayBuffer(4 * Int32Array.BYTES_PER_ELEMENT));
    const worker = new Worker(workerSource, { eval: true, workerData: state.buffer });
    worker.unref();
    worker.on("error", () => {});
    if (Atomics.wait(state, readySlot, 0, startBudgetMs) === "timed-out") {
      void worker.terminate();
      throw new ConnectError("the regex thread did not start", Code.Unavailable);
    }
    return { worker, state, seq: 0 };
  };

  return {
    test(source, flags, text, budgetMs) {
      running ??= start();
      const thread = running;
      const seq = ++thread.seq;
      const copy = new Uint8Array(text);
      thread.worker.postMessage({ seq, source, flags, text: copy }, [copy.buffer]);
      const until = performance.now() + budgetMs;
      for (;;) {
        const done = Atomics.load(thread.state, doneSlot);
        if (done === seq) break;
        const left = until - performance.now();
        if (left <= 0) {
          running = undefined;
          stuck++;
          // Its RE2 call runs on to its end whatever is done to the thread; at the lowest
          // priority it no longer takes a core from the event loop or another call.
          const tid = Atomics.load(thread.state, threadIdSlot);
          if (tid > 0) {
            try {
              setPriority(tid, givenUpNice);
            } catch {
              // Gone already, or not Linux: nothing left to lower.
            }
          }
          thread.worker.once("exit", () => {
            stuck--;
          });
          void thread.worker.terminate();
          return "over budget";
        }
        Atomics.wait(thread.state, doneSlot, done, left);
      }
      const result = Atomics.load(thread.state, resultSlot);
      if (result === 2) throw new ConnectError("the regex thread failed a test", Code.Internal);
      return result === 1 ? "match" : "no match";
    },
  };
}
