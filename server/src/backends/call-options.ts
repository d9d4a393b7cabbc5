import { Code, ConnectError } from "@connectrpc/connect";
import type { GetOptions, ListOptions } from "./backend.js";

/** defaultListLimit is the page size a list uses when the caller names none. */
export const defaultListLimit = 1000;

/**
 * checkRange validates a get's byte range and fills in the default offset.
 *
 * Guarantees: `offset` is a non-negative safe integer (default 0) and `length`, when set, is
 * one too; anything else is `INVALID_ARGUMENT`. Every backend validates ranges through it, so
 * they agree on what a bad range is.
 */
export function checkRange(opts: GetOptions | undefined): {
  offset: number;
  length: number | undefined;
} {
  const offset = opts?.offset ?? 0;
  const length = opts?.length;
  if (!isCount(offset)) {
    throw new ConnectError(
      `offset must be a non-negative integer, got ${offset}`,
      Code.InvalidArgument,
    );
  }
  if (length !== undefined && !isCount(length)) {
    throw new ConnectError(
      `length must be a non-negative integer, got ${length}`,
      Code.InvalidArgument,
    );
  }
  return { offset, length };
}

/**
 * checkListLimit validates a list's page size and fills in the default.
 *
 * Guarantees: the result is a positive safe integer (default `defaultListLimit`); a zero,
 * negative or fractional limit is `INVALID_ARGUMENT`.
 */
export function checkListLimit(opts: ListOptions | undefined): number {
  const limit = opts?.limit ?? defaultListLimit;
  if (!isCount(limit) || limit === 0) {
    throw new ConnectError(`limit must be a positive integer, got ${limit}`, Code.InvalidArgument);
  }
  return limit;
}

/**
 * sweepCutoffMs validates a sweep's `olderThanMs` and returns the cutoff: leftovers last
 * touched before this time (milliseconds since the epoch) are old enough to remove.
 *
 * Guarantees: a negative, infinite or NaN age is `INVALID_ARGUMENT`; every backend's
 * `sweepLeftovers` checks its age through it.
 */
export function sweepCutoffMs(olderThanMs: number): number {
  if (!Number.isFinite(olderThanMs) || olderThanMs < 0) {
    throw new ConnectError(
      `olderThanMs must be a non-negative number, got ${olderThanMs}`,
      Code.InvalidArgument,
    );
  }
  return Date.now() - olderThanMs;
}

function isCount(value: number): boolean {
  return Number.isSafeInteger(value) && value >= 0;
}

/**
 * signalOption is the options object that carries `signal` to a backend call, or none without
 * one (`exactOptionalPropertyTypes` keeps `{ signal: undefined }` out).
 */
export function signalOption(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal === undefined ? {} : { signal };
}
