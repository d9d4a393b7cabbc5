import { Code, ConnectError } from "@connectrpc/connect";
import { statusName } from "@spillway/wire";

/** EXIT_OK: the command did what it was asked. */
export const EXIT_OK = 0;
/** EXIT_NO_MATCH: `grep` found no matching line, as grep(1) exits 1. */
export const EXIT_NO_MATCH = 1;
/** EXIT_USAGE: a bad command line (unknown command or flag, missing argument), as grep(1) exits 2. */
export const EXIT_USAGE = 2;
/** EXIT_LOCAL: a failure on this machine: a file that cannot be read, an output that cannot be written. */
export const EXIT_LOCAL = 3;
/** EXIT_GRPC_BASE: a call the server answered with gRPC code N exits EXIT_GRPC_BASE + N. */
export const EXIT_GRPC_BASE = 10;

/**
 * exitCodeOfCode is the exit status of a call that failed with gRPC code `code`: 10 + the
 * code's number (NOT_FOUND 15, PERMISSION_DENIED 17, RESOURCE_EXHAUSTED 18, UNAVAILABLE 24,
 * UNAUTHENTICATED 26), so a script can tell every code apart and none collides with 0-3.
 */
export function exitCodeOfCode(code: Code): number {
  return EXIT_GRPC_BASE + code;
}

/** UsageError is a bad command line: the CLI prints it with a usage hint and exits 2. */
export interface UsageError {
  readonly usageError: string;
}

/** usageError builds the UsageError a command throws for a bad command line. */
export function usageError(message: string): UsageError {
  return { usageError: message };
}

/** isUsageError tells a thrown UsageError from any other failure. */
export function isUsageError(err: unknown): err is UsageError {
  return typeof err === "object" && err !== null && "usageError" in err;
}

/**
 * exitCodeOf maps what a command threw to its exit status: a UsageError 2, a ConnectError
 * 10 + its gRPC code, anything else (a local file or stream failure) 3.
 */
export function exitCodeOf(err: unknown): number {
  if (isUsageError(err)) return EXIT_USAGE;
  if (err instanceof ConnectError) return exitCodeOfCode(err.code);
  return EXIT_LOCAL;
}

/** The gRPC codes a user most often meets, as their exit status, for the usage text and docs. */
export const COMMON_EXIT_CODES: readonly [string, number][] = [
  Code.InvalidArgument,
  Code.NotFound,
  Code.AlreadyExists,
  Code.PermissionDenied,
  Code.ResourceExhausted,
  Code.Unavailable,
  Code.Unauthenticated,
].map((code) => [statusName(code), exitCodeOfCode(code)]);
