import { Code, ConnectError } from "@connectrpc/connect";
import type { Backend, BackendCallOptions } from "./backend.js";

/** Codes that say the store answered a call as the contract expects, or the caller gave up. */
const notStoreFaults: ReadonlySet<Code> = new Set([
  Code.NotFound,
  Code.AlreadyExists,
  Code.InvalidArgument,
  Code.ResourceExhausted,
  Code.Canceled,
]);

/**
 * pokeOnStoreFault returns `base` with `onFault` called whenever one of its calls rejects
 * with a code that may mean the store itself is unusable (not NOT_FOUND, ALREADY_EXISTS,
 * INVALID_ARGUMENT, RESOURCE_EXHAUSTED or CANCELED, and not a call whose signal was aborted).
 * Results and errors pass through unchanged.
 */
export function pokeOnStoreFault(base: Backend, onFault: () => void): Backend {
  const watched = async <T>(call: () => Promise<T>, callOpts?: BackendCallOptions) => {
    try {
      return await call();
    } catch (err) {
      if (callOpts?.signal?.aborted !== true && !notStoreFaults.has(ConnectError.from(err).code)) {
        onFault();
      }
      throw err;
    }
  };
  const { putMany, openLocal } = base;
  return {
    ...base,
    put: (key, body, callOpts) => watched(() => base.put(key, body, callOpts), callOpts),
    get: (key, callOpts) => watched(() => base.get(key, callOpts), callOpts),
    head: (key, callOpts) => watched(() => base.head(key, callOpts), callOpts),
    list: (prefix, callOpts) => watched(() => base.list(prefix, callOpts), callOpts),
    delete: (key, callOpts) => watched(() => base.delete(key, callOpts), callOpts),
    deleteMany: (keys, callOpts) => watched(() => base.deleteMany(keys, callOpts), callOpts),
    ...(putMany === undefined
      ? {}
      : {
          putMany: (keys, body, callOpts) => watched(() => putMany(keys, body, callOpts), callOpts),
        }),
    ...(openLocal === undefined
      ? {}
      : { openLocal: (key, callOpts) => watched(() => openLocal(key, callOpts), callOpts) }),
  };
}
