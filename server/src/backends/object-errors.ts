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

/** Node's codes for a TLS peer whose certificate the process does not accept. */
const untrustedCertificateCodes: ReadonlySet<string> = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_UNTRUSTED",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_REVOKED",
  "CERT_SIGNATURE_FAILURE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/**
 * untrustedCertificate returns the error for a store reached over HTTPS whose certificate
 * this process does not accept, or undefined when `err` is not such a failure. The SDK
 * mappings call it first.
 *
 * Guarantees: the code is `FAILED_PRECONDITION` (the deployment's trust or endpoint needs
 * fixing; retrying will not help), the message names Node's code and the remedy, and `err` is
 * kept as `cause`.
 */
export function untrustedCertificate(err: unknown, about: string): ConnectError | undefined {
  const code =
    typeof err === "object" && err !== null && "code" in err && typeof err.code === "string"
      ? err.code
      : undefined;
  if (code === undefined || !untrustedCertificateCodes.has(code)) return undefined;
  return new ConnectError(
    `the object store's TLS certificate is not trusted${about} [${code}]; add its CA to NODE_EXTRA_CA_CERTS or fix the endpoint`,
    Code.FailedPrecondition,
    undefined,
    undefined,
    err,
  );
}
