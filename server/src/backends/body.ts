import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Backend } from "./backend.js";

/** Where bytesBody keeps the buffer it presents, for readAllBytes to take without iterating. */
const wholeBytes = Symbol("whole bytes");

/**
 * readAllBytes collects a byte stream into one fresh buffer.
 *
 * Guarantees: the result never aliases a chunk of the stream (callers may reuse their
 * buffers); once more than `maxBytes` arrive it stops reading, closes the stream and throws
 * `RESOURCE_EXHAUSTED`, so an oversized body is never held in memory whole.
 */
export async function readAllBytes(
  body: AsyncIterable<Uint8Array>,
  maxBytes: number = Number.POSITIVE_INFINITY,
): Promise<Uint8Array> {
  const whole = (body as { [wholeBytes]?: Uint8Array })[wholeBytes];
  if (whole !== undefined) {
    // A buffer presented as a stream (bytesBody): the same answer without iterating it.
    if (whole.byteLength > maxBytes) {
      throw new ConnectError(`body exceeds the limit of ${maxBytes} bytes`, Code.ResourceExhausted);
    }
    return new Uint8Array(whole);
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.byteLength;
    if (total > maxBytes) {
      throw new ConnectError(`body exceeds the limit of ${maxBytes} bytes`, Code.ResourceExhausted);
    }
    // A copy: on a Buffer, slice() is a view.
    chunks.push(new Uint8Array(chunk));
  }
  // A single chunk is already a fresh copy (small objects arrive in one).
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

/**
 * bytesBody presents a buffer as a byte stream.
 *
 * Guarantees: the stream can be iterated any number of times (a retrying backend may replay
 * it); each pass yields the bytes once, or nothing for an empty buffer.
 */
export function bytesBody(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  return {
    [wholeBytes]: bytes,
    async *[Symbol.asyncIterator]() {
      if (bytes.byteLength > 0) yield bytes;
    },
  } as AsyncIterable<Uint8Array>;
}

/** emptyBody is a byte stream that yields nothing, for an empty range of an existing object. */
export function emptyBody(): AsyncIterable<Uint8Array> {
  return bytesBody(new Uint8Array(0));
}

/** IdleBound fails a body whose producer sends nothing for `ms` while its reader waits. */
export interface IdleBound {
  readonly ms: number;
  /** The error such a body fails with. */
  readonly error: () => ConnectError;
}

/**
 * responseBody streams an object store's response body to a reader.
 *
 * Guarantees: the reader sees the body's bytes until it ends; an abort of `signal` ends the
 * stream at once (as `abortableBody` does); with `idle`, a wait for the next chunk longer than
 * `idle.ms` fails with `idle.error()` (time the reader spends between reads does not count, so
 * neither a slow reader nor a body that keeps moving is ever cut); every failure, the abort's
 * included, is rethrown through `fail`, the backend's error mapping; the response stream is
 * destroyed (freeing its connection) when the body ends, fails, aborts, or the reader stops
 * early with `break`/`return`.
 */
export async function* responseBody(
  stream: Readable,
  signal: AbortSignal | undefined,
  fail: (err: unknown) => ConnectError,
  idle?: IdleBound,
): AsyncGenerator<Uint8Array> {
  try {
    yield* abortableBody(idle === undefined ? stream : idleBoundBody(stream, idle), signal);
  } catch (err) {
    throw fail(err);
  } finally {
    stream.destroy();
  }
}

/** Passes a body through, failing it when a wait for its next chunk outlasts the bound. */
async function* idleBoundBody(
  body: AsyncIterable<Uint8Array>,
  idle: IdleBound,
): AsyncGenerator<Uint8Array> {
  const source = body[Symbol.asyncIterator]();
  for (;;) {
    const quiet = new AbortController();
    const timer = setTimeout(() => quiet.abort(idle.error()), idle.ms);
    let next: IteratorResult<Uint8Array>;
    try {
      next = await raceAbort(source.next(), quiet.signal);
    } finally {
      clearTimeout(timer);
    }
    if (next.done === true) return;
    yield next.value;
  }
}

/**
 * abortableBody passes a byte stream through, ending it as soon as `signal` aborts.
 *
 * Guarantees: after an abort the next read rejects with `abortReason(signal)` at once, even
 * when the source is stalled waiting for its producer; the source is then told to close
 * (without waiting for it). Breaking out of the stream early also closes the source.
 */
export function abortableBody(
  body: AsyncIterable<Uint8Array>,
  signal: AbortSignal | undefined,
): AsyncIterable<Uint8Array> {
  if (signal === undefined) return body;
  return {
    async *[Symbol.asyncIterator]() {
      const source = body[Symbol.asyncIterator]();
      let ended = false;
      try {
        for (;;) {
          if (signal.aborted) throw abortReason(signal);
          const next = await raceAbort(source.next(), signal);
          if (next.done === true) {
            ended = true;
            return;
          }
          yield next.value;
        }
      } catch (err) {
        // A source that threw has already finished; there is nothing left to close.
        ended = !signal.aborted;
        throw err;
      } finally {
        if (!ended) closeQuietly(source);
      }
    },
  };
}

/**
 * throwIfAborted throws `abortReason(signal)` when the signal has aborted, and does nothing
 * otherwise (or without a signal).
 */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw abortReason(signal);
}

/**
 * abortReason is the ConnectError a call reports when its signal aborted.
 *
 * Guarantees: a ConnectError reason is returned as is, a `TimeoutError` reason (from
 * `AbortSignal.timeout`) is `DEADLINE_EXCEEDED`, and every other reason is `CANCELED`.
 */
export function abortReason(signal: AbortSignal): ConnectError {
  const reason: unknown = signal.reason;
  if (reason instanceof ConnectError) return reason;
  if (reason instanceof Error && reason.name === "TimeoutError") {
    return new ConnectError(
      "deadline exceeded",
      Code.DeadlineExceeded,
      undefined,
      undefined,
      reason,
    );
  }
  return new ConnectError("operation canceled", Code.Canceled, undefined, undefined, reason);
}

/**
 * raceAbort settles like `pending`, unless the signal aborts first: then it rejects at once
 * with `abortReason(signal)`. Its abort listener is removed as soon as `pending` settles, so
 * racing many steps of a long stream against one signal holds nothing after each step.
 */
export function raceAbort<T>(pending: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    // Producing `pending` may itself have aborted the signal, before anyone could listen.
    if (signal.aborted) {
      pending.catch(() => undefined);
      onAbort();
      return;
    }
    signal.addEventListener("abort", onAbort, { once: true });
    pending.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

function closeQuietly(source: AsyncIterator<Uint8Array>): void {
  try {
    source.return?.().catch(() => undefined);
  } catch {
    // Closing is a courtesy to the producer; the caller already has its answer.
  }
}

/**
 * readObject reads a whole small object (a record, run metadata), or the range of it `range`
 * selects, or returns undefined when it does not exist — including one deleted between opening
 * and reading it. More than maxBytes is RESOURCE_EXHAUSTED.
 */
export async function readObject(
  backend: Backend,
  key: string,
  maxBytes: number,
  signal?: AbortSignal,
  range: { readonly offset?: number; readonly length?: number } = {},
): Promise<Uint8Array | undefined> {
  try {
    return await readAllBytes(
      await backend.get(key, signal === undefined ? range : { ...range, signal }),
      maxBytes,
    );
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.NotFound) return undefined;
    throw err;
  }
}
