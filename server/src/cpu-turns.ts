import { Code, ConnectError } from "@connectrpc/connect";
import { createTurnQueue } from "./turn-queue.js";

/**
 * CpuTurns shares a process's event loop among the owners (tenants) of long computations: a
 * large offload's single pass, a JSONPath scan, a search read on the calling thread. Each runs
 * in slices; once a slice has lasted its time the computation waits for its owner's next turn.
 * Turns go one an event-loop iteration, owners in turn and each owner's computations in turn,
 * so between two slices the loop serves every call that is ready (a window, a small offload,
 * a stat), and one owner's many computations get no more turns than another owner's one.
 */
export interface CpuTurns {
  /** A computation of `owner`'s; its first slice starts at its first pause. */
  begin(owner: string): CpuSlice;
}

/** CpuSlice is one computation's place in CpuTurns. */
export interface CpuSlice {
  /**
   * Before each piece of work: undefined while the current slice lasts (go on at once; the
   * first call starts the first slice), else a promise that resolves at the owner's next turn,
   * when a new slice starts. It rejects CANCELED if `signal` aborts first, and the turn is
   * given up.
   */
  pause(signal?: AbortSignal): Promise<void> | undefined;
}

/**
 * inPieces hands `work` the bytes in pieces of at most `pieceBytes`, each once `slice` lets it
 * go on (CpuSlice.pause), and stops early when `work` returns false. It rejects CANCELED when
 * `signal` aborts during a wait.
 */
export async function inPieces(
  slice: CpuSlice,
  bytes: Uint8Array,
  pieceBytes: number,
  signal: AbortSignal | undefined,
  work: (piece: Uint8Array) => unknown,
): Promise<void> {
  for (let at = 0; at < bytes.byteLength; at += pieceBytes) {
    const pause = slice.pause(signal);
    if (pause !== undefined) await pause;
    if (work(bytes.subarray(at, at + pieceBytes)) === false) return;
  }
}

/** How long a slice lasts: short enough that calls waiting behind one barely notice it. */
const defaultSliceMs = 2;

/**
 * createCpuTurns returns turns whose slices last `sliceMs` by `clock` (performance.now unless
 * given), granted one per `schedule` (setImmediate unless given: one an event-loop iteration,
 * after the loop has polled for I/O).
 */
export function createCpuTurns(
  opts: { sliceMs?: number; clock?: () => number; schedule?: (grant: () => void) => void } = {},
): CpuTurns {
  const sliceMs = opts.sliceMs ?? defaultSliceMs;
  const clock = opts.clock ?? (() => performance.now());
  const schedule = opts.schedule ?? ((grant) => setImmediate(grant));
  // Each waiting computation's grant, by owner.
  const waiting = createTurnQueue<() => void>();
  let scheduled = false;

  const next = () => {
    scheduled = false;
    const turn = waiting.shift();
    if (!waiting.isEmpty()) {
      scheduled = true;
      schedule(next);
    }
    turn?.item();
  };

  return {
    begin(owner) {
      let sliceStart: number | undefined;
      return {
        pause(signal) {
          const now = clock();
          sliceStart ??= now;
          if (now - sliceStart < sliceMs) return undefined;
          if (signal?.aborted === true) return Promise.reject(cancelled());
          return new Promise<void>((resolve, reject) => {
            const onAbort = () => {
              waiting.remove(owner, grant);
              reject(cancelled());
            };
            const grant = () => {
              signal?.removeEventListener("abort", onAbort);
              sliceStart = clock();
              resolve();
            };
            signal?.addEventListener("abort", onAbort, { once: true });
            waiting.push(owner, grant);
            if (!scheduled) {
              scheduled = true;
              schedule(next);
            }
          });
        },
      };
    },
  };
}

function cancelled(): ConnectError {
  return new ConnectError("the call was cancelled while it waited for its turn", Code.Canceled);
}

let shared: CpuTurns | undefined;

/** The process's turns: one event loop, shared by every core the process builds. */
export function sharedCpuTurns(): CpuTurns {
  shared ??= createCpuTurns();
  return shared;
}

/** A computation that never pauses: for callers outside a server (tests, tools). */
export const unsliced: CpuSlice = { pause: () => undefined };
