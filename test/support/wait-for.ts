import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";

/** Probe reports whether a server is ready; a rejection counts as "not ready yet". */
export type Probe = () => Promise<boolean>;

/** WaitForOptions tunes waitFor. */
export interface WaitForOptions {
  /** Called between attempts; a returned reason stops waiting at once (e.g. the process died). */
  abortReason?: () => string | undefined;
}

/**
 * waitFor resolves once `target` is ready: a URL answers a GET with a 2xx status, or a probe
 * resolves true. It rejects with DeadlineExceeded after `timeoutMs`, or with Unavailable as soon
 * as `options.abortReason` reports one.
 */
export async function waitFor(
  target: string | Probe,
  timeoutMs: number,
  options: WaitForOptions = {},
): Promise<void> {
  const probe = typeof target === "string" ? httpOk(target) : target;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    const reason = options.abortReason?.();
    if (reason !== undefined) {
      throw new ConnectError(reason, Code.Unavailable);
    }
    try {
      if (await probe()) {
        return;
      }
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const detail = lastError === undefined ? "" : ` (last error: ${String(lastError)})`;
      const what = typeof target === "string" ? target : "probe";
      throw new ConnectError(
        `${what} not ready after ${timeoutMs} ms${detail}`,
        Code.DeadlineExceeded,
      );
    }
    await sleep(100);
  }
}

function httpOk(url: string): Probe {
  return async () => {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    await res.body?.cancel();
    return res.ok;
  };
}
