/**
 * The one interface between the Spillway service and a store of bytes.
 *
 * Keys are `/`-separated paths whose segments were already validated and encoded by the
 * service (see `keys.ts`); a backend still refuses any key that could escape its
 * root or prefix. Every call takes an `AbortSignal`; every failure is a `ConnectError`
 * produced by the backend's single error-mapping function.
 */

import type { ConnectError } from "@connectrpc/connect";

/** BackendCallOptions are accepted by every backend call. */
export interface BackendCallOptions {
  /** Aborting it cancels the call; a cancelled put leaves nothing visible. */
  readonly signal?: AbortSignal;
}

/** GetOptions select a byte range of an object. */
export interface GetOptions extends BackendCallOptions {
  /** First byte to return (0-based). Default 0. */
  readonly offset?: number;
  /** Bytes to return from offset; unset reads to the end. */
  readonly length?: number;
}

/** ListOptions page through keys under a prefix. */
export interface ListOptions extends BackendCallOptions {
  /** Return keys strictly after this one (the last key of the previous page). */
  readonly startAfter?: string;
  /** Largest page wanted; a backend may return fewer. Default 1000. */
  readonly limit?: number;
  /**
   * Called for each entry under the prefix that is no object and cannot be walked (on the
   * filesystem: a symlink, a special file, a directory that cannot be read), with its key and
   * why. With it, such an entry is skipped and the listing goes on; without it, a symlink or
   * an unreadable directory fails the call (FAILED_PRECONDITION, PERMISSION_DENIED). Stores
   * without such entries never call it.
   */
  readonly onRefused?: (key: string, reason: ConnectError) => void;
}

/** ListPage is one page of keys in ascending byte order. */
export interface ListPage {
  /** Full keys under the prefix, ascending. */
  readonly keys: string[];
  /** True when more keys follow the last one returned. */
  readonly truncated: boolean;
}

/** ObjectInfo describes a stored object. */
export interface ObjectInfo {
  /** Size in bytes. */
  readonly size: number;
  /** When the object was written (milliseconds since the epoch). */
  readonly modifiedMs: number;
}

/** LocalObject is an object opened as a local file, for reads on the caller's own threads. */
export interface LocalObject {
  /** A descriptor open for reading the object's bytes; valid until close. */
  readonly fd: number;
  /** The file's size when it was opened. */
  readonly size: number;
  /** Closes the descriptor. */
  close(): Promise<void>;
}

/**
 * Backend stores immutable objects under keys.
 *
 * Guarantees every implementation gives (checked by `describeBackendContract`):
 * - `put` is create-only and atomic: the object becomes visible whole or not at all; a key
 *   that exists is `ALREADY_EXISTS` and is left untouched; an aborted or failed body leaves
 *   nothing visible.
 * - `get` streams the requested range; a missing key is `NOT_FOUND`; a range past the end
 *   yields no bytes.
 * - `list` returns keys under a prefix in ascending order, paginated.
 * - `delete` and `deleteMany` are idempotent: deleting a missing key succeeds.
 * - `putMany`, where present, is `put` under several names at once, create-only per name.
 */
export interface Backend {
  /** Backend kind reported by GetServerInfo: `memory`, `filesystem`, `s3`, `minio`. */
  readonly kind: string;
  /** Writes a new object from a stream of bytes; resolves with its size once durable. */
  put(key: string, body: AsyncIterable<Uint8Array>, opts?: BackendCallOptions): Promise<ObjectInfo>;
  /** Streams an object, or a range of it. */
  get(key: string, opts?: GetOptions): Promise<AsyncIterable<Uint8Array>>;
  /** Describes an object, or returns undefined when it does not exist. */
  head(key: string, opts?: BackendCallOptions): Promise<ObjectInfo | undefined>;
  /** Lists keys that start with prefix. */
  list(prefix: string, opts?: ListOptions): Promise<ListPage>;
  /** Removes an object; missing objects are not an error. */
  delete(key: string, opts?: BackendCallOptions): Promise<void>;
  /**
   * Removes many objects (a run's worth, in batches where the store has a batch call);
   * missing objects are not an error. Resolves once every key is gone.
   */
  deleteMany(keys: readonly string[], opts?: BackendCallOptions): Promise<void>;
  /**
   * Removes what interrupted writes left behind — temp files, incomplete multipart uploads —
   * that are older than `olderThanMs`; resolves with how many it removed. Never touches a
   * visible object. Absent on backends whose writes leave nothing behind.
   */
  sweepLeftovers?(olderThanMs: number, opts?: BackendCallOptions): Promise<number>;
  /**
   * Makes sure the store itself aborts incomplete multipart uploads under this backend's keys
   * at most `days` days after they started (a bucket lifecycle rule), adding the rule when none
   * does: resolves "present" or "added"; UNIMPLEMENTED where the store does not keep such a
   * rule, PERMISSION_DENIED without the permission. Absent on backends without multipart uploads.
   */
  expireIncompleteUploads?(days: number, opts?: BackendCallOptions): Promise<"present" | "added">;
  /**
   * Writes one object from a stream of bytes under every key of `keys`, each name create-only:
   * resolves once all are durable with, per key in order, the object's info or the
   * ConnectError that name met (ALREADY_EXISTS for a taken one, which keeps its bytes). A
   * failed or aborted body, or a refused key, fails the whole call with nothing visible. The
   * names are independent afterwards: each is read, listed and deleted on its own. Absent on
   * stores where more names cost more copies (the object stores); callers put each instead.
   */
  putMany?(
    keys: readonly string[],
    body: AsyncIterable<Uint8Array>,
    opts?: BackendCallOptions,
  ): Promise<(ObjectInfo | ConnectError)[]>;
  /**
   * Takes back a chunk a `get` stream yielded, from a caller that will read no view of it
   * again, so its memory can serve later reads. Calling it is optional (chunks not handed
   * back are collected as usual); absent on backends whose chunks are not pooled.
   */
  release?(chunk: Uint8Array): void;
  /**
   * Opens an object's file for positioned reads on threads of the caller's own (a search
   * spread over every core), with get's checks: a missing key is NOT_FOUND, and what get
   * refuses to read (a symlink, a special file, a file outside the root) is refused the same
   * way. Absent on stores whose objects are not local files.
   */
  openLocal?(key: string, opts?: BackendCallOptions): Promise<LocalObject>;
  /**
   * Checks cheaply that the store is usable now, rejecting with the ConnectError calls would
   * meet. Absent: the server's readiness probe lists one key instead (server/store-readiness.ts),
   * which is enough where a list reaches the store as a write would.
   */
  probe?(opts?: BackendCallOptions): Promise<void>;
  /** Releases clients, handles and timers. */
  close(): Promise<void>;
}
