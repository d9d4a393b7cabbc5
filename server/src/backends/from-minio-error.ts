import { Code, ConnectError } from "@connectrpc/connect";
import { untrustedCertificate } from "./object-errors.js";
import { storeTimeoutOf } from "./s3-request-timeout.js";
import { storeFull } from "./s3-store-full.js";

/** S3 error codes (as the minio client reports them in `err.code`) and their status. */
const codeByS3Code: Readonly<Record<string, Code>> = {
  NoSuchKey: Code.NotFound,
  NotFound: Code.NotFound,
  NoSuchUpload: Code.NotFound,
  PreconditionFailed: Code.AlreadyExists,
  NoSuchBucket: Code.FailedPrecondition,
  AccessDenied: Code.PermissionDenied,
  InvalidAccessKeyId: Code.PermissionDenied,
  SignatureDoesNotMatch: Code.PermissionDenied,
  ExpiredToken: Code.PermissionDenied,
  InvalidToken: Code.PermissionDenied,
  SlowDown: Code.Unavailable,
  ServiceUnavailable: Code.Unavailable,
  InternalError: Code.Unavailable,
  RequestTimeout: Code.Unavailable,
  XMinioServerNotInitialized: Code.Unavailable,
};

/** Errors the client raises before sending anything: a bad bucket, object name or endpoint. */
const argumentErrorNames: ReadonlySet<string> = new Set([
  "InvalidArgumentError",
  "InvalidPortError",
  "InvalidEndpointError",
  "InvalidBucketNameError",
  "IsValidBucketNameError",
  "InvalidObjectNameError",
  "InvalidPrefixError",
]);

/** Socket-level failures: the server is down, unreachable or dropped the connection. */
const networkErrnos: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ENOTFOUND",
]);

/**
 * The minio client turns a retryable HTTP status (408, 429, 5xx) into a plain Error whose
 * message carries the status, once its own retries are spent.
 */
const retryableStatus = /Retryable HTTP status: (\d{3})/;

/**
 * fromMinioError is the one function that turns a failure of the `minio` client into a
 * ConnectError.
 *
 * Guarantees: an existing ConnectError is returned as is; a request cancelled by its store
 * timeout (`storeTimeoutError`, or an error it caused) is that `UNAVAILABLE` error; any other
 * `AbortError` is `CANCELED`;
 * the client's own argument checks (bad bucket or object name, port, endpoint) are
 * `INVALID_ARGUMENT`;
 * a store out of space (MinIO's `XMinioStorageFull`, or an internal error caused by `no space
 * left on device`) is `RESOURCE_EXHAUSTED` saying the store is full;
 * S3 codes map as NoSuchKey/NotFound/NoSuchUpload → NOT_FOUND, PreconditionFailed (a
 * create-only write met an existing key) → ALREADY_EXISTS, NoSuchBucket → FAILED_PRECONDITION
 * naming the bucket, AccessDenied/InvalidAccessKeyId/SignatureDoesNotMatch (and expired or
 * invalid tokens) → PERMISSION_DENIED, SlowDown/ServiceUnavailable/InternalError/RequestTimeout
 * → UNAVAILABLE; a retryable HTTP status the client gave up on (408, 429, 5xx) and socket
 * failures (ECONNREFUSED, ECONNRESET, ETIMEDOUT, …) are UNAVAILABLE; anything else is
 * `INTERNAL`; a store whose TLS certificate this process does not trust is
 * `FAILED_PRECONDITION` (`untrustedCertificate`). Messages name the key (when given) and at
 * most the S3 code or errno, never the server's own text, and a permission failure says
 * nothing about which credential was wrong; the original error is kept as `cause` for logs.
 */
export function fromMinioError(err: unknown, key?: string): ConnectError {
  if (err instanceof ConnectError) return err;
  const timeout = storeTimeoutOf(err);
  if (timeout !== undefined) return timeout;
  const about = key === undefined ? "" : ` (key "${key}")`;
  if (err instanceof Error && err.name === "AbortError") {
    return new ConnectError(`operation aborted${about}`, Code.Canceled, undefined, undefined, err);
  }
  if (err instanceof Error && argumentErrorNames.has(err.name)) {
    return new ConnectError(
      `invalid bucket, object name or endpoint${about} [${err.name}]`,
      Code.InvalidArgument,
      undefined,
      undefined,
      err,
    );
  }
  const untrusted = untrustedCertificate(err, about);
  if (untrusted !== undefined) return untrusted;
  const s3Code = stringField(err, "code");
  const full = storeFull(s3Code, undefined, err, about);
  if (full !== undefined) return full;
  const mapped = s3Code === undefined ? undefined : codeByS3Code[s3Code];
  if (s3Code !== undefined && mapped !== undefined) {
    return new ConnectError(
      describe(mapped, s3Code, about, err),
      mapped,
      undefined,
      undefined,
      err,
    );
  }
  if (s3Code !== undefined && networkErrnos.has(s3Code)) {
    return new ConnectError(
      `object store is unreachable${about} [${s3Code}]`,
      Code.Unavailable,
      undefined,
      undefined,
      err,
    );
  }
  const status = err instanceof Error ? retryableStatus.exec(err.message)?.[1] : undefined;
  if (status !== undefined) {
    return new ConnectError(
      `object store is temporarily unavailable${about} [HTTP ${status}]`,
      Code.Unavailable,
      undefined,
      undefined,
      err,
    );
  }
  const detail = s3Code !== undefined && /^[A-Za-z0-9_]+$/.test(s3Code) ? ` [${s3Code}]` : "";
  return new ConnectError(
    `object store failure${about}${detail}`,
    Code.Internal,
    undefined,
    undefined,
    err,
  );
}

function describe(code: Code, s3Code: string, about: string, err: unknown): string {
  switch (code) {
    case Code.NotFound:
      return `not found${about}`;
    case Code.AlreadyExists:
      return `already exists${about}`;
    case Code.FailedPrecondition: {
      const bucket = stringField(err, "bucketname");
      return bucket === undefined
        ? `bucket does not exist${about}`
        : `bucket ${bucket} does not exist${about}`;
    }
    case Code.PermissionDenied:
      return `object store denied access${about}; check the configured credentials`;
    default:
      return `object store is temporarily unavailable${about} [${s3Code}]`;
  }
}

function stringField(err: unknown, field: string): string | undefined {
  if (typeof err !== "object" || err === null || !(field in err)) return undefined;
  const value: unknown = (err as Record<string, unknown>)[field];
  return typeof value === "string" && value !== "" ? value : undefined;
}
