import { Code, ConnectError } from "@connectrpc/connect";
import { markFault } from "../call-fault.js";
import type { Backend } from "./backend.js";
import { onCallFailure } from "./on-call-failure.js";

/**
 * Codes a call may also end with through the client's own doing, so that only their raise
 * site can say it was the store: it refuses the server's credentials (PERMISSION_DENIED), its
 * bucket, directory or certificate is wrong (FAILED_PRECONDITION), its disk or quota is full
 * (RESOURCE_EXHAUSTED). Every other code already says whose fault it is.
 */
const ambiguous: ReadonlySet<Code> = new Set([
  Code.PermissionDenied,
  Code.FailedPrecondition,
  Code.ResourceExhausted,
]);

/**
 * markStoreFaults returns `base` with every PERMISSION_DENIED, FAILED_PRECONDITION or
 * RESOURCE_EXHAUSTED a call of the store rejects with marked as the server's fault
 * (call-fault.ts), so logs and alert counters tell a broken store from a client refused for
 * the same code. Left unmarked: a call whose signal was aborted, and a `put` or `putMany` whose
 * body — the caller's upload, which fails with RESOURCE_EXHAUSTED past a size limit — is what
 * failed. Results, streams and errors pass through otherwise unchanged.
 */
export function markStoreFaults(base: Backend): Backend {
  // The stream of a `get` is passed on untouched: a read failing midway fails with
  // UNAVAILABLE, DATA_LOSS or INTERNAL, which are the server's by their code.
  return onCallFailure(
    base,
    (err, opts) => {
      if (
        err instanceof ConnectError &&
        ambiguous.has(err.code) &&
        opts?.signal?.aborted !== true
      ) {
        markFault(err, "server");
      }
    },
    { streams: false },
  );
}
