import { Code, ConnectError } from "@connectrpc/connect";

/**
 * notFound is the error a backend raises itself when a key names no object (errors that come
 * from a store's answer go through the backend's mapping function instead).
 *
 * Guarantees: the code is `NOT_FOUND` and the message names the key as the SDK mappings do.
 */
export function notFound(key: string): ConnectError {
  return new ConnectError(`object not found (key "${key}")`, Code.NotFound);
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
