import { Code, ConnectError } from "@connectrpc/connect";

/** RetryOptions bound how often and how patiently a call is retried. */
export interface RetryOptions {
  /** Attempts in all, the first one included; default 3. 1 disables retries. */
  readonly maxAttempts?: number;
  /** Backoff before the second attempt, doubled for each later one; default 100 ms. */
  readonly baseDelayMs?: number;
  /** Upper bound of one backoff; default 2000 ms. */
  readonly maxDelayMs?: number;
}

/** RetryCall describes one call that retryUnavailable may repeat. */
export interface RetryCall {
  /** Retry settings; defaults as documented on RetryOptions. */
  readonly retry?: RetryOptions;
  /** Cancels the whole call, backoff sleeps included (the error is then CANCELED). */
  readonly signal?: AbortSignal;
  /** Deadline of the whole call, every attempt and backoff included. */
  readonly timeoutMs?: number;
  /** Whether the request can be sent again; checked before each retry. Default: always. */
  readonly replayable?: () => boolean;
  /** Which failures are worth another attempt. Default: UNAVAILABLE only. */
  readonly retryable?: (err: ConnectError) => boolean;
}

/**
 * isTransientError tells whether a failed call is worth repeating on another connection:
 * UNAVAILABLE, or the HTTP/2 stream reset (RST_STREAM INTERNAL_ERROR, which gRPC reports as
 * INTERNAL) that a proxy such as nginx sends when the replica behind an already-started call
 * dies. Only idempotent calls may be repeated on it: reads, and offloads (the same key and
 * bytes commit once).
 */
export function isTransientError(err: ConnectError): boolean {
  return (
    err.code === Code.Unavailable ||
    (err.code === Code.Internal &&
      /stream closed with error code (NGHTTP2_)?INTERNAL_ERROR/i.test(err.rawMessage))
  );
}

/** RetryBudget is the retry state of one call: its deadline and what follows a failure. */
export interface RetryBudget {
  /** Time left for the next attempt (undefined: no deadline); DEADLINE_EXCEEDED when none. */
  left(): number | undefined;
  /**
   * After failed attempt n (1 for the first), rethrows err unchanged when the call must not be
   * repeated, and otherwise sleeps the backoff before attempt n + 1.
   */
  failed(err: unknown, n: number): Promise<void>;
}

/**
 * retryBudget returns the retry state retryUnavailable keeps for call, for callers that run
 * their own attempts (a read that resumes where the failed attempt stopped).
 */
export function retryBudget(call: RetryCall = {}): RetryBudget {
  const maxAttempts = Math.max(1, Math.floor(call.retry?.maxAttempts ?? 3));
  const baseDelayMs = call.retry?.baseDelayMs ?? 100;
  const maxDelayMs = call.retry?.maxDelayMs ?? 2000;
  const deadline = call.timeoutMs === undefined ? undefined : Date.now() + call.timeoutMs;
  const remaining = () => (deadline === undefined ? undefined : deadline - Date.now());
  return {
    left() {
      const left = remaining();
      if (left !== undefined && left <= 0) {
        throw new ConnectError("the call's deadline passed between retries", Code.DeadlineExceeded);
      }
      return left;
    },
    async failed(err, n) {
      const retryable =
        err instanceof ConnectError &&
        (call.retryable?.(err) ?? err.code === Code.Unavailable) &&
        n < maxAttempts &&
        (call.replayable?.() ?? true) &&
        call.signal?.aborted !== true;
      if (!retryable) throw err;
      const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (n - 1));
      const delay = Math.random() * ceiling;
      const leftNow = remaining();
      // Sleeping past the deadline would only turn this UNAVAILABLE into a later, vaguer error.
      if (leftNow !== undefined && leftNow <= delay) throw err;
      await sleep(delay, call.signal);
    },
  };
}

/**
 * retryUnavailable runs attempt and repeats it only after an UNAVAILABLE ConnectError (or what
 * `retryable` accepts), at most
 * maxAttempts times in all, sleeping an exponential backoff with full jitter in between. It
 * never retries another code (a DEADLINE_EXCEEDED may have committed, and only idempotent calls
 * should be given to it), never retries once `replayable()` says the request cannot be sent
 * again, and never outlives `timeoutMs`: each attempt receives the time that is left as its own
 * deadline, and the last error is rethrown unchanged.
 */
export async function retryUnavailable<T>(
  attempt: (timeoutMs: number | undefined) => Promise<T>,
  call: RetryCall = {},
): Promise<T> {
  const budget = retryBudget(call);
  for (let n = 1; ; n++) {
    const left = budget.left();
    try {
      return await attempt(left);
    } catch (err) {
      await budget.failed(err, n);
    }
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = () => {
      clearTimeout(timer);
      reject(new ConnectError("the call was cancelled during a retry backoff", Code.Canceled));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", aborted);
      resolve();
    }, ms);
    if (signal?.aborted === true) aborted();
    else signal?.addEventListener("abort", aborted, { once: true });
  });
}
