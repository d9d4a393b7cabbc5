import { Code, ConnectError } from "@connectrpc/connect";
import { grpcCode, type Metrics } from "../metrics.js";
import type { Backend } from "./backend.js";
import { onCallFailure } from "./on-call-failure.js";

/** Codes the Backend contract uses for ordinary answers: a missing key, a key already taken. */
const contractOutcomes: ReadonlySet<Code> = new Set([Code.NotFound, Code.AlreadyExists]);

/**
 * instrumentBackend returns `base` with every failed call counted in
 * `spillway_backend_errors_total{backend,code}`: a rejected promise, a `get` stream that
 * fails while it is read, or a name `putMany` could not store. Results and errors pass
 * through unchanged. Not counted, because the store did not fail: `NOT_FOUND` and
 * `ALREADY_EXISTS` (the contract's answers for a missing key and a taken one), a call whose
 * signal was aborted (the caller went away), and a `put` or `putMany` whose body — the
 * caller's upload — failed.
 */
export function instrumentBackend(base: Backend, metrics: Metrics): Backend {
  return onCallFailure(
    base,
    (err, opts) => {
      const code = ConnectError.from(err).code;
      if (contractOutcomes.has(code) || opts?.signal?.aborted === true) return;
      metrics.backendErrors.inc({ backend: base.kind, grpc_code: grpcCode(code) });
    },
    { streams: true },
  );
}
