import { ConnectError } from "@connectrpc/connect";
import { observeIterable } from "../observe-iterable.js";
import type { Backend, BackendCallOptions } from "./backend.js";

/** What onCallFailure calls for each failure: the error and the failed call's options. */
export type CallFailureHook = (err: unknown, opts: BackendCallOptions | undefined) => void;

/**
 * onCallFailure returns `base` with `hook` called once for each failure of one of its calls:
 * a rejected or synchronously throwing call (`close` included), a name `putMany` could not
 * store, and, when `streams` is set, a `get` stream that fails while it is read. Not called
 * for a `put` or `putMany` whose body — the caller's upload — is what failed. Results, streams
 * and errors pass through unchanged; the hook sees each error before the caller does.
 */
export function onCallFailure(
  base: Backend,
  hook: CallFailureHook,
  options: { readonly streams: boolean },
): Backend {
  // A thunk, so a backend that throws synchronously is seen too.
  const watched = async <T>(call: () => Promise<T>, opts?: BackendCallOptions): Promise<T> => {
    try {
      return await call();
    } catch (err) {
      hook(err, opts);
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
      if (!bodyFailed) hook(err, opts);
      throw err;
    }
  };
  const { putMany, openLocal } = base;
  return {
    ...base,
    put: (key, body, opts) => uploaded(body, opts, (observed) => base.put(key, observed, opts)),
    get: options.streams
      ? async (key, opts) =>
          observeIterable(await watched(() => base.get(key, opts), opts), {
            onEnd: (ending) => {
              if (ending.kind === "failed") hook(ending.error, opts);
            },
          })
      : (key, opts) => watched(() => base.get(key, opts), opts),
    head: (key, opts) => watched(() => base.head(key, opts), opts),
    list: (prefix, opts) => watched(() => base.list(prefix, opts), opts),
    delete: (key, opts) => watched(() => base.delete(key, opts), opts),
    deleteMany: (keys, opts) => watched(() => base.deleteMany(keys, opts), opts),
    ...(putMany === undefined
      ? {}
      : {
          async putMany(keys, body, opts) {
            const results = await uploaded(body, opts, (observed) => putMany(keys, observed, opts));
            for (const result of results) {
              if (result instanceof ConnectError) hook(result, opts);
            }
            return results;
          },
        }),
    ...(openLocal === undefined
      ? {}
      : { openLocal: (key, opts) => watched(() => openLocal(key, opts), opts) }),
    close: () => watched(() => base.close()),
  };
}
