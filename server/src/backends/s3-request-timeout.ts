import { AsyncLocalStorage } from "node:async_hooks";
import { subscribe } from "node:diagnostics_channel";
import type { ClientRequest } from "node:http";
import type { Socket } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { abortReason, type IdleBound, raceAbort, throwIfAborted } from "./body.js";

/**
 * How long a request to an object store (s3 and minio backends) may go without an answer, or
 * without a byte moving on its connection, before it is cancelled. Default of both backends'
 * `requestTimeoutMs`.
 */
export const defaultStoreRequestTimeoutMs = 10_000;

/** Timeout errors made here, so the mappings can tell them from any other cancellation. */
const timeouts = new WeakSet<ConnectError>();

/**
 * checkStoreRequestTimeout validates a backend's `requestTimeoutMs` option and fills in the
 * default: a positive safe integer of milliseconds, or `INVALID_ARGUMENT`.
 */
export function checkStoreRequestTimeout(timeoutMs: number | undefined): number {
  const ms = timeoutMs ?? defaultStoreRequestTimeoutMs;
  if (!Number.isSafeInteger(ms) || ms < 1) {
    throw new ConnectError(
      `requestTimeoutMs must be a positive integer, got ${ms}`,
      Code.InvalidArgument,
    );
  }
  return ms;
}

/**
 * storeTimeoutError is the error a store request that timed out fails with.
 *
 * Guarantees: the code is `UNAVAILABLE` (the store is stuck; a retry may reach it once it
 * answers again), the message says "the object store did not answer within N s", and
 * `storeTimeoutOf` recognizes it.
 */
export function storeTimeoutError(timeoutMs: number): ConnectError {
  const err = new ConnectError(
    `the object store did not answer within ${timeoutMs / 1000} s`,
    Code.Unavailable,
  );
  timeouts.add(err);
  return err;
}

/**
 * storeIdleBound is the bound a store's response body gets (responseBody's `idle`): its next
 * chunk within `timeoutMs` while the reader waits, else `storeTimeoutError(timeoutMs)`.
 */
export function storeIdleBound(timeoutMs: number): IdleBound {
  return { ms: timeoutMs, error: () => storeTimeoutError(timeoutMs) };
}

/**
 * storeTimeoutOf returns the `storeTimeoutError` that `err` is, or that caused it (an SDK's
 * `AbortError` carries the signal's reason as `cause`), or undefined when the failure is not a
 * store request timeout.
 */
export function storeTimeoutOf(err: unknown): ConnectError | undefined {
  let at: unknown = err;
  for (let depth = 0; depth < 4 && typeof at === "object" && at !== null; depth++) {
    if (at instanceof ConnectError && timeouts.has(at)) return at;
    at = "cause" in at ? at.cause : undefined;
  }
  return undefined;
}

/** Records each HTTP request started inside boundStoreRequest with the bound it belongs to. */
const current = new AsyncLocalStorage<(request: ClientRequest) => void>();
let subscribed = false;

function watchRequests(): void {
  if (subscribed) return;
  subscribed = true;
  // Published when a request is handed its socket, in the async context of the call that made
  // it: both SDKs' requests are seen without a transport of our own.
  subscribe("http.client.request.start", (message) => {
    const request = (message as { request?: ClientRequest }).request;
    if (request !== undefined) current.getStore()?.(request);
  });
}

/** Bytes a socket has received, plus the bytes the kernel has taken from it to send. */
function bytesMoved(socket: Socket): number {
  // libuv's queue of bytes not yet taken by the kernel: one large write (an 8 MiB part) is
  // dispatched at once, so bytesWritten alone would not show a slow upload moving.
  const queued = (socket as { _handle?: { writeQueueSize?: unknown } })._handle?.writeQueueSize;
  const pending = typeof queued === "number" ? queued : socket.writableLength;
  return socket.bytesRead + socket.bytesWritten - pending;
}

/**
 * boundStoreRequest runs one request to an object store (`call`, given the signal to pass to
 * the SDK) so that it cannot hang: it settles with the call, or rejects with
 * `storeTimeoutError(timeoutMs)` once `timeoutMs` pass with no byte moving on the HTTP
 * requests the call started (so a slow upload or answer that keeps moving is not cut), or
 * with `abortReason(callerSignal)` as soon as the caller aborts.
 *
 * Guarantees: either way the call's HTTP requests are destroyed (their sockets closed, so a
 * client library that ignores signals is cancelled too) and the signal given to `call`
 * aborts with the same reason; the rejection comes at once, without waiting for the library
 * to notice; the timer and listeners are released when the call settles. Only requests that
 * got a socket are watched: one queued in an agent counts as no progress.
 */
export async function boundStoreRequest<T>(
  timeoutMs: number,
  callerSignal: AbortSignal | undefined,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  throwIfAborted(callerSignal);
  watchRequests();
  const controller = new AbortController();
  const signal =
    callerSignal === undefined
      ? controller.signal
      : AbortSignal.any([callerSignal, controller.signal]);
  const requests = new Map<ClientRequest, { socket?: Socket; base: number }>();
  let settled = false;
  const watch = (request: ClientRequest) => {
    if (settled) return;
    if (signal.aborted) {
      request.destroy(abortReason(signal));
      return;
    }
    const entry: { socket?: Socket; base: number } = { base: 0 };
    requests.set(request, entry);
    const onSocket = (socket: Socket) => {
      entry.socket = socket;
      entry.base = bytesMoved(socket);
    };
    if (request.socket !== null) onSocket(request.socket);
    else request.once("socket", onSocket);
  };
  const moved = () => {
    let total = 0;
    for (const entry of requests.values()) {
      if (entry.socket !== undefined) total += bytesMoved(entry.socket) - entry.base;
    }
    return total;
  };
  const onAbort = () => {
    const reason = abortReason(signal);
    for (const request of requests.keys()) request.destroy(reason);
  };
  signal.addEventListener("abort", onAbort, { once: true });
  // Checked a few times per bound, so a stall is caught within 1.25 × timeoutMs of the last byte.
  const tickMs = Math.max(1, Math.ceil(timeoutMs / 4));
  let lastMoved = 0;
  let lastMoveAt = performance.now();
  const ticker = setInterval(() => {
    const now = moved();
    if (now !== lastMoved) {
      lastMoved = now;
      lastMoveAt = performance.now();
    } else if (performance.now() - lastMoveAt >= timeoutMs) {
      controller.abort(storeTimeoutError(timeoutMs));
    }
  }, tickMs);
  try {
    return await raceAbort(
      current.run(watch, () => call(signal)),
      signal,
    );
  } finally {
    settled = true;
    clearInterval(ticker);
    signal.removeEventListener("abort", onAbort);
    requests.clear();
  }
}
