import { Code, ConnectError } from "@connectrpc/connect";
import type { Backend, BackendCallOptions } from "./backends/backend.js";
import { raceAbort } from "./backends/body.js";

/** How long one probe may take before the store counts as unusable. */
const storeProbeTimeoutMs = 2_000;

/** Failures fire at most one probe per this long, however many calls fail. */
const minPokeGapMs = 1_000;

/** StoreReadiness tracks whether the store answers, by probing it now and then. */
export interface StoreReadiness {
  /**
   * Probes the store now (or joins a probe under way) and resolves with whether it answered
   * within storeProbeTimeoutMs; never rejects.
   */
  check(): Promise<boolean>;
  /**
   * Says a call just saw the store fail: a probe follows at once, or a second after the last
   * one started, so a storm of failures costs at most one probe a second.
   */
  poke(): void;
  /** Probes every intervalMs until stop(). */
  start(): void;
  /** Stops the timer; a probe under way still reports. */
  stop(): void;
}

/**
 * createStoreReadiness runs `probe` (a cheap call to the store: a one-key list, a stat of the
 * root) and calls `onChange(usable, error)` whenever its outcome flips, starting from usable: a
 * probe that rejects or takes longer than storeProbeTimeoutMs makes the store unusable (it is
 * given a signal that aborts then, and is failed at that moment even if it does not stop), the
 * next one that succeeds makes it usable again. Probes never overlap. intervalMs must be
 * positive: an unusable store is only seen usable again by a probe.
 */
export function createStoreReadiness(opts: {
  probe: (callOpts: BackendCallOptions) => Promise<unknown>;
  intervalMs: number;
  onChange: (usable: boolean, error?: ConnectError) => void;
}): StoreReadiness {
  let usable = true;
  let running: Promise<boolean> | undefined;
  let lastStartMs = Number.NEGATIVE_INFINITY;
  let timer: NodeJS.Timeout | undefined;
  let poked: NodeJS.Timeout | undefined;

  const report = (now: boolean, error?: ConnectError) => {
    if (now === usable) return;
    usable = now;
    opts.onChange(now, error);
  };
  const check = (): Promise<boolean> => {
    running ??= (async () => {
      lastStartMs = performance.now();
      try {
        const signal = AbortSignal.timeout(storeProbeTimeoutMs);
        // Raced as well as passed on: a probe that ignores its signal still fails in time.
        await raceAbort(opts.probe({ signal }), signal);
        report(true);
        return true;
      } catch (err) {
        report(false, ConnectError.from(err, Code.Unavailable));
        return false;
      } finally {
        running = undefined;
      }
    })();
    return running;
  };
  return {
    check,
    poke() {
      if (poked !== undefined) return;
      // A probe under way may have started before the failure: one more follows it.
      const waitMs = Math.max(0, lastStartMs + minPokeGapMs - performance.now());
      poked = setTimeout(() => {
        poked = undefined;
        void (running ?? Promise.resolve()).then(check);
      }, waitMs);
      poked.unref();
    },
    start() {
      if (timer !== undefined) return;
      timer = setInterval(() => void check(), opts.intervalMs);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
      clearTimeout(poked);
      timer = undefined;
      poked = undefined;
    },
  };
}

/**
 * probeStore is the probe a backend offers (`Backend.probe`), or else a list of at most one
 * key under `t/`: it fails when the store is unreachable, the bucket is missing or the
 * credentials are refused.
 */
export function probeStore(backend: Backend, callOpts: BackendCallOptions): Promise<unknown> {
  return backend.probe !== undefined
    ? backend.probe(callOpts)
    : backend.list("t/", { limit: 1, ...callOpts });
}
