import { Code, ConnectError } from "@connectrpc/connect";

/**
 * notFound is the error a backend raises itself when a key names no object (errors that come
 * from a store's answer go through the backend's mapping function instead).
 *
 * Guarantees: the code is `NOT_FOUND` and the message names the key as the SDK mappings do.
 * The error carries no stack trace: a missing object is an answer, not a fault, and every
 * offload asks about several (its record, the run's tombstone and TTL), where collecting the
 * stack was a measurable share of the call (~10 µs per error in a server profile).
 */
export function notFound(key: string): ConnectError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new ConnectError(`object not found (key "${key}")`, Code.NotFound);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * alreadyExists is the error a backend raises itself when a create-only put meets an existing
 * object.
 *
 * Guarantees: the code is `ALREADY_EXISTS` and the message names the key as the SDK mappings do.
 */
export function alreadyExists(key: string): ConnectError {
  return new ConnectError(`object already exists (key "${key}")`, Code.AlreadyExists);
}
