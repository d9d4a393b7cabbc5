import { Code, ConnectError } from "@connectrpc/connect";
import { untrustedCertificate } from "./object-errors.js";
import { storeTimeoutOf } from "./s3-request-timeout.js";
import { storeFull } from "./s3-store-full.js";

/** Node and SDK error codes that mean the endpoint could not be reached or dropped the call. */
const networkCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ERR_STREAM_PREMATURE_CLOSE",
]);

/** S3 error codes a store sends when it is shedding load. */
const throttlingNames = new Set([
  "SlowDown",
  "Throttling",
  "ThrottlingException",
  "ThrottledException",
  "RequestLimitExceeded",
  "RequestThrottled",
  "RequestThrottledException",
  "TooManyRequests",
  "TooManyRequestsException",
  "ServiceUnavailable",
]);

/** S3 error codes that mean the configured credentials are not accepted. */
const deniedNames = new Set([
  "AccessDenied",
  "InvalidAccessKeyId",
  "SignatureDoesNotMatch",
  "InvalidToken",
  "ExpiredToken",
  "AllAccessDisabled",
]);

/**
 * S3 error codes for a body that does not match the checksum the request carries: the bytes
 * changed between Spillway and the store (S3 and SeaweedFS say `BadDigest`, MinIO names the
 * header that did not match).
 */
const corruptedBodyNames = new Set([
  "BadDigest",
  "XAmzContentChecksumMismatch",
  "XAmzContentSHA256Mismatch",
]);

/**
 * fromS3Error is the one function that turns an AWS SDK (`@aws-sdk/client-s3`) failure into a
 * ConnectError.
 *
 * Guarantees:
 * - an existing ConnectError is returned as is; a request cancelled by its store timeout
 *   (`storeTimeoutError`, also as the `cause` of the SDK's `AbortError`) is that `UNAVAILABLE`
 *   error; any other `AbortError` becomes `CANCELED`;
 * - a store whose TLS certificate this process does not trust becomes `FAILED_PRECONDITION`
 *   (`untrustedCertificate`);
 * - `NoSuchBucket` becomes `FAILED_PRECONDITION` naming the bucket (the operator's setup is
 *   wrong, retrying will not help);
 * - `NoSuchKey`, `NotFound` and any other 404 become `NOT_FOUND`;
 * - `PreconditionFailed` (412) and `ConditionalRequestConflict` (409), the answers to a
 *   create-only write that lost, become `ALREADY_EXISTS`;
 * - `InvalidRange` (416) becomes `OUT_OF_RANGE`, which a ranged read turns into no bytes;
 * - `AccessDenied`, `InvalidAccessKeyId`, `SignatureDoesNotMatch` and any other 403 become
 *   `PERMISSION_DENIED` with a fixed message: the store's explanation (bucket policies, key
 *   ids) stays in `cause` for the server's logs and never reaches a client;
 * - a body the store refused for not matching its checksum (`BadDigest`, MinIO's
 *   `XAmzContentChecksumMismatch` and `XAmzContentSHA256Mismatch`) becomes `UNAVAILABLE`: the
 *   bytes changed on the way, nothing was stored, and sending them again may succeed;
 * - a read whose bytes do not match the checksum the store keeps for the object (the SDK's
 *   `Checksum mismatch` at the end of a whole-object read) becomes `DATA_LOSS`;
 * - a store out of space (MinIO's `XMinioStorageFull`, HTTP 507, or an internal error caused by
 *   `no space left on device`) becomes `RESOURCE_EXHAUSTED` saying the store is full: retrying
 *   will not help until space is freed;
 * - throttling (`SlowDown`, `Throttling…`, 429, 503), every other 5xx, timeouts and network
 *   failures (refused, reset, unreachable, `socket hang up`) become `UNAVAILABLE`, which
 *   callers may retry once the store is back;
 * - anything else is `INTERNAL`.
 * Messages name the key when given; the original error is always kept as `cause`.
 */
export function fromS3Error(err: unknown, key?: string, bucket?: string): ConnectError {
  if (err instanceof ConnectError) return err;
  const timeout = storeTimeoutOf(err);
  if (timeout !== undefined) return timeout;
  const about = key === undefined ? "" : ` (key "${key}")`;
  const wrap = (message: string, code: Code): ConnectError =>
    new ConnectError(message, code, undefined, undefined, err);
  const untrusted = untrustedCertificate(err, about);
  if (untrusted !== undefined) return untrusted;
  const name = nameOf(err);
  if (name === "AbortError") return wrap(`operation aborted${about}`, Code.Canceled);
  if (name === "TimeoutError" || isNetworkError(err)) {
    return wrap(`object store is unreachable${about}`, Code.Unavailable);
  }
  const status = statusOf(err);
  if (name === "NoSuchBucket") {
    const named = bucket ?? bucketOf(err);
    const which = named === undefined ? "the configured bucket" : `bucket ${named}`;
    return wrap(`${which} does not exist${about}`, Code.FailedPrecondition);
  }
  if (name === "NoSuchKey" || name === "NotFound" || status === 404) {
    return wrap(`object not found${about}`, Code.NotFound);
  }
  if (
    name === "PreconditionFailed" ||
    name === "ConditionalRequestConflict" ||
    status === 412 ||
    status === 409
  ) {
    return wrap(`object already exists${about}`, Code.AlreadyExists);
  }
  if (name === "InvalidRange" || status === 416) {
    return wrap(`range is outside the object${about}`, Code.OutOfRange);
  }
  if ((name !== undefined && deniedNames.has(name)) || status === 403) {
    return wrap(
      `the object store denied access${about}; the server's storage credentials or policy need attention`,
      Code.PermissionDenied,
    );
  }
  if (name !== undefined && corruptedBodyNames.has(name)) {
    return wrap(
      `object store refused the bytes as changed on the way (checksum mismatch)${about}; retry`,
      Code.Unavailable,
    );
  }
  if (err instanceof Error && err.message.startsWith("Checksum mismatch:")) {
    return wrap(
      `stored bytes do not match the checksum the object store keeps for them${about}`,
      Code.DataLoss,
    );
  }
  const full = storeFull(name, status, err, about);
  if (full !== undefined) return full;
  if ((name !== undefined && throttlingNames.has(name)) || status === 429 || status === 503) {
    return wrap(`object store is throttling requests, retry later${about}`, Code.Unavailable);
  }
  if ((status !== undefined && status >= 500) || faultOf(err) === "server") {
    return wrap(`object store failed the request${about}`, Code.Unavailable);
  }
  return wrap(`storage failure${about}`, Code.Internal);
}

function nameOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  // Service errors carry the S3 error code both as `name` and as `Code`; prefer the wire code.
  const wire = "Code" in err ? err.Code : undefined;
  if (typeof wire === "string" && wire !== "") return wire;
  return err instanceof Error ? err.name : undefined;
}

function statusOf(err: unknown): number | undefined {
  if (typeof err !== "object" || err === null || !("$metadata" in err)) return undefined;
  const metadata = err.$metadata;
  if (typeof metadata !== "object" || metadata === null || !("httpStatusCode" in metadata)) {
    return undefined;
  }
  const status = metadata.httpStatusCode;
  return typeof status === "number" ? status : undefined;
}

function faultOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null || !("$fault" in err)) return undefined;
  return typeof err.$fault === "string" ? err.$fault : undefined;
}

function bucketOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null || !("BucketName" in err)) return undefined;
  return typeof err.BucketName === "string" ? err.BucketName : undefined;
}

function isNetworkError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = "code" in err ? err.code : undefined;
  if (typeof code === "string" && networkCodes.has(code)) return true;
  return err.message === "socket hang up";
}
