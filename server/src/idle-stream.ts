import { Code, ConnectError } from "@connectrpc/connect";
import { abortReason } from "./backends/body.js";

/** IdleStreamReader reads a client stream that must not go quiet while the server waits. */
export interface IdleStreamReader<T> {
  /**
   * Waits for the stream's next message. Fails with DEADLINE_EXCEEDED when the client sends
   * nothing for idleMs of this wait, and with the call's abort reason (see abortReason) as soon
   * as the signal aborts, without waiting for the client.
   */
  next(): Promise<IteratorResult<T>>;
  /** Stops the timer and the abort listener; call it once the stream is done with. */
  close(): void;
}

/**
 * createIdleStreamReader wraps a client stream's iterator so that an abandoned stream cannot
 * hold a partial upload open forever. Only time spent waiting for the client counts: a server
 * step between two reads (a slow backend write) never trips the idle limit.
 *
 * One timer (re-armed per read) and one abort listener serve the whole stream, where a timer,
 * a race and a listener per message cost a few microseconds each on every small offload.
 */
export function createIdleStreamReader<T>(
  iterator: AsyncIterator<T>,
  idleMs: number,
  signal: AbortSignal,
  what: string,
): IdleStreamReader<T> {
  // Rejects the read in progress, if any; a timer or abort between reads finds none.
  let fail: ((err: ConnectError) => void) | undefined;
  const timer = setTimeout(() => {
    fail?.(new ConnectError(`${what} sent nothing for ${idleMs} ms`, Code.DeadlineExceeded));
  }, idleMs);
  const onAbort = () => fail?.(abortReason(signal));
  signal.addEventListener("abort", onAbort, { once: true });
  return {
    next() {
      if (signal.aborted) return Promise.reject(abortReason(signal));
      timer.refresh();
      return new Promise<IteratorResult<T>>((resolve, reject) => {
        // Whichever comes first (the message, the idle timer, the abort) settles this read.
        const current = (err: unknown) => {
          if (fail !== current) return;
          fail = undefined;
          reject(err);
        };
        fail = current;
        iterator.next().then((result) => {
          if (fail !== current) return;
          fail = undefined;
          resolve(result);
        }, current);
      });
    },
    close() {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    },
  };
}
