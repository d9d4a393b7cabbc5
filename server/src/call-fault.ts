import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Fault says whose fault a failed call is: `client` when the request was at fault or the
 * caller chose the ending (a bad argument, a foreign handle, a limit, its own deadline or
 * cancel, a digest it declared that its bytes do not match), `server` when the server or its
 * store failed (a crash, an unreachable or refusing store, a corrupt stored record).
 */
export type Fault = "client" | "server";

/** The mark a raise site leaves on a ConnectError whose code alone does not say whose fault. */
const faultMark = Symbol("spillway.fault");

type Marked = ConnectError & { [faultMark]?: Fault };

/**
 * Codes that are the server's fault unless their raise site says otherwise: the server or its
 * store broke, or a stored record does not read back as written.
 */
const serverCodes: ReadonlySet<Code> = new Set([
  Code.Internal,
  Code.Unknown,
  Code.Unavailable,
  Code.DataLoss,
]);

/**
 * markFault records on `err` whose fault it is and returns it, for the codes whose usual
 * reading is wrong at this raise site: `DATA_LOSS` from a digest the client declared is the
 * client's, `PERMISSION_DENIED`, `FAILED_PRECONDITION` or `RESOURCE_EXHAUSTED` from the store
 * (it refuses the server's credentials, its bucket or directory is missing, its disk is full)
 * the server's. A mark already present is kept: the first raise site knows best.
 */
export function markFault(err: ConnectError, fault: Fault): ConnectError {
  const marked = err as Marked;
  if (marked[faultMark] === undefined) {
    Object.defineProperty(marked, faultMark, { value: fault, enumerable: false });
  }
  return err;
}

/**
 * faultOf says whose fault a call's ending is, or undefined for success (`err` undefined). A
 * mark left by markFault wins; otherwise INTERNAL, UNKNOWN, UNAVAILABLE and DATA_LOSS (and any
 * error that is not a ConnectError and not an abort) are the server's, and every
 * other code — INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
 * UNAUTHENTICATED, FAILED_PRECONDITION, OUT_OF_RANGE, RESOURCE_EXHAUSTED, CANCELED,
 * DEADLINE_EXCEEDED, ABORTED (a concurrent writer of the same key), UNIMPLEMENTED — the
 * client's.
 */
export function faultOf(err: unknown): Fault | undefined {
  if (err === undefined) return undefined;
  // What callers see: an error that is not a ConnectError answers UNKNOWN (CANCELED for an abort).
  const failure = ConnectError.from(err) as Marked;
  const mark = failure[faultMark];
  if (mark !== undefined) return mark;
  return serverCodes.has(failure.code) ? "server" : "client";
}

/** Node's names for a connection its client closed or reset under a call. */
const goneCauses = new Set([
  "ECONNRESET",
  "EPIPE",
  "ERR_STREAM_DESTROYED",
  "ERR_STREAM_PREMATURE_CLOSE",
]);

/**
 * endingOf is how logs and metrics read a call's ending `err` given its `signal`: a call whose
 * client went away is CANCELED (the client's), whatever its write to the broken connection
 * failed with. Over HTTP/1.1 connect-node reports such a call as INTERNAL or UNKNOWN (`write
 * EPIPE` while streaming a response) or ABORTED (ECONNRESET while reading an upload), where
 * HTTP/2 gives CANCELED; so an INTERNAL or UNKNOWN ending of a call whose signal was aborted,
 * or any of the three caused by a connection its client closed or reset, is the client's
 * cancel. Any other ending is returned as it is.
 */
export function endingOf(err: unknown, signal: AbortSignal): unknown {
  if (err === undefined) return err;
  const failure = ConnectError.from(err);
  if (![Code.Internal, Code.Unknown, Code.Aborted].includes(failure.code)) return err;
  const gone = fromGoneConnection(failure);
  // ABORTED is also the server's own answer to a race (a merge, a delete): only a reset says.
  if (failure.code === Code.Aborted ? !gone : !(gone || signal.aborted)) return err;
  return new ConnectError(
    "the client went away before the call ended",
    Code.Canceled,
    undefined,
    undefined,
    err,
  );
}

/** Whether `err`, or an error it was caused by, is a Node error of a connection closed under it. */
function fromGoneConnection(err: unknown): boolean {
  let at: unknown = err;
  for (let depth = 0; depth < 4 && typeof at === "object" && at !== null; depth++) {
    const code = (at as { code?: unknown }).code;
    if (typeof code === "string" && goneCauses.has(code)) return true;
    if (at instanceof Error && /\b(EPIPE|ECONNRESET)\b/.test(at.message)) return true;
    at = (at as { cause?: unknown }).cause;
  }
  return false;
}
