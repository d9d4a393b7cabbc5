import { Code, ConnectError } from "@connectrpc/connect";
import { grpcCode, type Metrics } from "../metrics.js";
import { observeIterable } from "../observe-iterable.js";
import type { Backend, BackendCallOptions } from "./backend.js";

/** Codes the Backend contract uses for ordinary answers: a missing key, a key already taken. */
const contractOutcomes: ReadonlySet<Code> = new Set([Code.NotFound, Code.AlreadyExists]);

/**
 * instrumentBackend returns `base` with every failed call counted in
 * `spillway_backend_errors_total{backend,code}`: a rejected promise, a `get` stream that
 * fails while it is read, or a name `putMany` could not store. Results and errors pass
 * through unchanged. Not counted, because the store did not fail: `NOT_FOUND` and
 * `ALREADY_EXISTS` (the contract's answers for a missing key and a taken one), a call whose
 * signal was aborted (the caller went away), and a `put` or `putMany` whose body — the
 * caller's upload — failed.
 */
export function instrumentBackend(base: Backend, metrics: Metrics): Backend {
  const count = (err: unknown, opts: BackendCallOptions | undefined) => {
    const code = ConnectError.from(err).code;
    if (contractOutcomes.has(code) || opts?.signal?.aborted === true) return;
    metrics.backendErrors.inc({ backend: base.kind, grpc_code: grpcCode(code) });
  };
  // A thunk, so a backend that throws synchronously is counted too.
  const counted = async <T>(call: () => Promise<T>, opts?: BackendCallOptions): Promise<T> => {
    try {
      return await call();
    } catch (err) {
      count(err, opts);
      throw err;
    }
  };
  // A write counts unless its body — the caller's upload — is what failed.
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
      if (!bodyFailed) count(err, opts);
      throw err;
    }
  };
  const { putMany } = base;
  return {
    ...base,
    put: (key, body, opts) => uploaded(body, opts, (observed) => base.put(key, observed, opts)),
    async get(key, opts) {
      const stream = await counted(() => base.get(key, opts), opts);
      return observeIterable(stream, {
        onEnd: (ending) => {
          if (ending.kind === "failed") count(ending.error, opts);
        },
      });
    },
    head: (key, opts) => counted(() => base.head(key, opts), opts),
    list: (prefix, opts) => counted(() => base.list(prefix, opts), opts),
    delete: (key, opts) => counted(() => base.delete(key, opts), opts),
    deleteMany: (keys, opts) => counted(() => base.deleteMany(keys, opts), opts),
    ...(putMany === undefined
      ? {}
      : {
          async putMany(keys, body, opts) {
            const results = await uploaded(body, opts, (observed) => putMany(keys, observed, opts));
            for (const result of results) {
              if (result instanceof ConnectError) count(result, opts);
            }
            return results;
          },
        }),
    close: () => counted(() => base.close()),
  };
}
