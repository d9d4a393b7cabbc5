import { Code, ConnectError } from "@connectrpc/connect";
import { markFault } from "../call-fault.js";
import { observeIterable } from "../observe-iterable.js";
import type { Backend, BackendCallOptions } from "./backend.js";

/**
 * Codes a call may also end with through the client's own doing, so that only their raise
 * site can say it was the store: it refuses the server's credentials (PERMISSION_DENIED), its
 * bucket, directory or certificate is wrong (FAILED_PRECONDITION), its disk or quota is full
 * (RESOURCE_EXHAUSTED). Every other code already says whose fault it is.
 */
const ambiguous: ReadonlySet<Code> = new Set([
  Code.PermissionDenied,
  Code.FailedPrecondition,
  Code.ResourceExhausted,
]);

/**
 * markStoreFaults returns `base` with every PERMISSION_DENIED, FAILED_PRECONDITION or
 * RESOURCE_EXHAUSTED a call of the store rejects with marked as the server's fault
 * (call-fault.ts), so logs and alert counters tell a broken store from a client refused for
 * the same code. Left unmarked: a call whose signal was aborted, and a `put` or `putMany` whose
 * body — the caller's upload, which fails with RESOURCE_EXHAUSTED past a size limit — is what
 * failed. Results, streams and errors pass through otherwise unchanged.
 */
export function markStoreFaults(base: Backend): Backend {
  const mark = (err: unknown, opts: BackendCallOptions | undefined) => {
    if (err instanceof ConnectError && ambiguous.has(err.code) && opts?.signal?.aborted !== true) {
      markFault(err, "server");
    }
  };
  const marked = async <T>(call: () => Promise<T>, opts?: BackendCallOptions): Promise<T> => {
    try {
      return await call();
    } catch (err) {
      mark(err, opts);
      throw err;
    }
  };
  const uploaded = async <T>(
    body: AsyncIterable<Uint8Array>,
    opts: BackendCallOptions | undefined,
    write: (observed: AsyncIterable<Uint8Array>) => Promise<T>,
  ): Promise<T> => {
    let bodyFailed = false;
    const observed = observeIterable(body, {
      onEnd: (ending) => {
        bodyFailed ||= ending.kind === "failed";
      },
    });
    try {
      return await write(observed);
    } catch (err) {
      if (!bodyFailed) mark(err, opts);
      throw err;
    }
  };
  const { putMany } = base;
  return {
    ...base,
    put: (key, body, opts) => uploaded(body, opts, (observed) => base.put(key, observed, opts)),
    // The stream itself is passed on untouched: a read failing midway fails with UNAVAILABLE,
    // DATA_LOSS or INTERNAL, which are the server's by their code.
    get: (key, opts) => marked(() => base.get(key, opts), opts),
    head: (key, opts) => marked(() => base.head(key, opts), opts),
    list: (prefix, opts) => marked(() => base.list(prefix, opts), opts),
    delete: (key, opts) => marked(() => base.delete(key, opts), opts),
    deleteMany: (keys, opts) => marked(() => base.deleteMany(keys, opts), opts),
    ...(putMany === undefined
      ? {}
      : {
          async putMany(keys, body, opts) {
            const results = await uploaded(body, opts, (observed) => putMany(keys, observed, opts));
            for (const result of results) {
              if (result instanceof ConnectError) mark(result, opts);
            }
            return results;
          },
        }),
  };
}
