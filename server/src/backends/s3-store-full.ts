import { Code, ConnectError } from "@connectrpc/connect";

/** S3 error codes a store sends when it has no room for the bytes. */
const fullNames: ReadonlySet<string> = new Set(["XMinioStorageFull", "InsufficientStorage"]);

/** What a store's internal error says when its disk ran out mid-write (MinIO: `cause(...)`). */
const noSpace = /no space left on device/i;

/**
 * storeFull returns the error for an object store that refused a write for lack of space, or
 * undefined when the failure is something else. Both S3 mappings (`fromS3Error`,
 * `fromMinioError`) call it with the store's error code (`name`), HTTP status, the error and
 * the `(key "…")` suffix of their messages.
 *
 * Guarantees: MinIO's `XMinioStorageFull` (its free-space threshold), `InsufficientStorage` or
 * HTTP 507, and an internal error whose message says `no space left on device` (a drive that
 * filled mid-write) become `RESOURCE_EXHAUSTED` "the object store is out of space": a retry
 * does not help until space is freed, as with the filesystem backend's ENOSPC. The store's
 * own text stays in `cause`, for the server's logs.
 */
export function storeFull(
  name: string | undefined,
  status: number | undefined,
  err: unknown,
  about: string,
): ConnectError | undefined {
  const said = err instanceof Error ? err.message : "";
  const full = (name !== undefined && fullNames.has(name)) || status === 507 || noSpace.test(said);
  if (!full) return undefined;
  return new ConnectError(
    `the object store is out of space${about}; free space or grow the store, then retry`,
    Code.ResourceExhausted,
    undefined,
    undefined,
    err,
  );
}
