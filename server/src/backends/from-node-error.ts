import { Code, ConnectError } from "@connectrpc/connect";

/** Node system-error codes and the status each one is reported as. */
const codeByErrno: Readonly<Record<string, Code>> = {
  ENOENT: Code.NotFound,
  EEXIST: Code.AlreadyExists,
  EACCES: Code.PermissionDenied,
  EPERM: Code.PermissionDenied,
  ENOSPC: Code.ResourceExhausted,
  EDQUOT: Code.ResourceExhausted,
  EMFILE: Code.Unavailable,
  ENFILE: Code.Unavailable,
  EAGAIN: Code.Unavailable,
  EBUSY: Code.Unavailable,
  ELOOP: Code.FailedPrecondition,
  ENOTDIR: Code.FailedPrecondition,
  EISDIR: Code.FailedPrecondition,
  // Opening a socket (or a device without a driver) where a file was expected.
  ENXIO: Code.FailedPrecondition,
  ENAMETOOLONG: Code.InvalidArgument,
  // A read-only volume: the operator's to fix, and no retry does.
  EROFS: Code.FailedPrecondition,
};

/** Words for an errno whose status's words would misdescribe it. */
const wordsByErrno: Readonly<Record<string, string>> = {
  EROFS: "the storage filesystem is read-only",
};

/** Words for each status, so messages describe the failure without echoing server paths. */
const wordsByCode: Readonly<Partial<Record<Code, string>>> = {
  [Code.NotFound]: "not found",
  [Code.AlreadyExists]: "already exists",
  [Code.PermissionDenied]: "permission denied by the storage filesystem",
  [Code.ResourceExhausted]: "storage is out of space or quota",
  [Code.Unavailable]: "storage is temporarily unavailable",
  [Code.FailedPrecondition]:
    "storage path is not a plain file or directory (symlink or type clash)",
  [Code.InvalidArgument]: "storage name is too long",
};

/**
 * fromNodeError is the one function that turns a Node filesystem failure into a ConnectError.
 *
 * Guarantees: an existing ConnectError is returned as is; an `AbortError` becomes `CANCELED`;
 * system errors map by errno (ENOENT → NOT_FOUND, EEXIST → ALREADY_EXISTS, EACCES/EPERM →
 * PERMISSION_DENIED, ENOSPC/EDQUOT → RESOURCE_EXHAUSTED, EMFILE/ENFILE/EAGAIN/EBUSY →
 * UNAVAILABLE, ELOOP/ENOTDIR/EISDIR/ENXIO/EROFS → FAILED_PRECONDITION, ENAMETOOLONG →
 * INVALID_ARGUMENT);
 * anything else is `INTERNAL`. The message names the key (when given) and the errno and
 * syscall, never the Node message, so absolute server paths never reach a client; the original
 * error is kept as `cause` for logs.
 */
export function fromNodeError(err: unknown, key?: string): ConnectError {
  if (err instanceof ConnectError) return err;
  const about = key === undefined ? "" : ` (key "${key}")`;
  if (isAbortError(err)) {
    return new ConnectError(`operation aborted${about}`, Code.Canceled, undefined, undefined, err);
  }
  const errno = errnoOf(err);
  if (errno !== undefined) {
    const code = codeByErrno[errno] ?? Code.Internal;
    const words = wordsByErrno[errno] ?? wordsByCode[code] ?? "storage failure";
    const syscall = syscallOf(err);
    const detail = syscall === undefined ? errno : `${syscall}: ${errno}`;
    return new ConnectError(`${words}${about} [${detail}]`, code, undefined, undefined, err);
  }
  return new ConnectError(`storage failure${about}`, Code.Internal, undefined, undefined, err);
}

function isAbortError(err: unknown): boolean {
  return err instanceof Error && err.name === "AbortError";
}

/** errnoOf returns the errno name (`ENOENT`, …) of a Node system error, or undefined. */
export function errnoOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null || !("code" in err)) return undefined;
  const { code } = err;
  return typeof code === "string" && /^E[A-Z0-9]+$/.test(code) ? code : undefined;
}

function syscallOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null || !("syscall" in err)) return undefined;
  const { syscall } = err;
  return typeof syscall === "string" && /^[a-z0-9_]+$/.test(syscall) ? syscall : undefined;
}
