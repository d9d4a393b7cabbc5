import { randomUUID } from "node:crypto";
import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";
import { isSpanContextValid, trace } from "@opentelemetry/api";
import type { Logger } from "pino";
import { endingOf, faultOf } from "./call-fault.js";
import { observeIterable } from "./observe-iterable.js";

/** BatchItemFailure is one failed item of a batch call: its index and what it failed with. */
export interface BatchItemFailure {
  readonly index: number;
  readonly error: unknown;
}

/**
 * Client-caused endings that are the caller's choice or an ordinary answer, not a refusal worth
 * a warning: it cancelled, its deadline passed, it asked for what does not exist, or it repeated
 * a create.
 */
const quietCodes: ReadonlySet<Code> = new Set([
  Code.Canceled,
  Code.DeadlineExceeded,
  Code.NotFound,
  Code.AlreadyExists,
]);

/**
 * batchItemFailuresKey is where a batch handler puts the list of its failed items, so that the
 * call's log shows them, and the metrics count the server faults among them, although the call
 * itself succeeds.
 */
export const batchItemFailuresKey = createContextKey<BatchItemFailure[] | undefined>(undefined, {
  description: "failed items of a batch call",
});

/** A request id a log line carries as sent: 1 to 128 printable ASCII characters, no space. */
const loggableRequestId = /^[\x21-\x7e]{1,128}$/;

/**
 * The request id fields of a call's log lines: `requestId`, the caller's `x-request-id` when
 * loggableRequestId allows it and one made here otherwise, and for a header refused its length
 * alone (`droppedRequestIdChars`). The header is never copied whole: it comes from any caller,
 * authenticated or not, and would be written into every line of the call.
 */
function requestIdFields(header: string | null): {
  requestId: string;
  droppedRequestIdChars?: number;
} {
  if (header === null || header === "") return { requestId: randomUUID() };
  if (loggableRequestId.test(header)) return { requestId: header };
  return { requestId: randomUUID(), droppedRequestIdChars: header.length };
}

/**
 * createLogInterceptor writes one structured line per call — procedure, request id (the
 * caller's `x-request-id` only when it is 1 to 128 printable ASCII characters without a space,
 * else one made here and the refused header's length), code, duration, and the trace id when
 * the call is traced — and one per failed item of a batch call
 * (see batchItemFailuresKey), at a level that says who must act (call-fault.ts):
 * - **error** for a server fault (INTERNAL, UNKNOWN, UNAVAILABLE, DATA_LOSS of a stored record,
 *   a store refusing the server's credentials or full): the operator;
 * - **warn** for a call the client's request got refused (INVALID_ARGUMENT, PERMISSION_DENIED,
 *   RESOURCE_EXHAUSTED from a limit, DATA_LOSS of a digest the client declared, …): the client;
 * - **info** for client-caused endings the caller chose or that are ordinary answers
 *   (CANCELED, DEADLINE_EXCEEDED, NOT_FOUND, ALREADY_EXISTS);
 * - **debug** for success.
 * Messages of server faults are logged but never echoed beyond what the handler already put in
 * them.
 */
export function createLogInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const requestIds = requestIdFields(req.header.get("x-request-id"));
    const traced = trace.getActiveSpan()?.spanContext();
    const traceId = traced !== undefined && isSpanContextValid(traced) ? traced.traceId : undefined;
    const done = (ending?: unknown) => {
      const err = endingOf(ending, req.signal);
      const fields = {
        procedure: req.method.name,
        ...requestIds,
        ...(traceId === undefined ? {} : { traceId }),
        // Go's names, as the metrics' grpc_code label: "OK", "PermissionDenied", …
        code: err === undefined ? "OK" : Code[ConnectError.from(err).code],
        ms: Math.round(performance.now() - started),
      };
      logEnding(fields, err, "call");
      for (const { index, error } of req.contextValues.get(batchItemFailuresKey) ?? []) {
        const item = { ...fields, item: index, code: Code[ConnectError.from(error).code] };
        logEnding(item, error, "batch item failed");
      }
    };
    /** Logs one call's or item's ending at the level its fault calls for. */
    const logEnding = (fields: object, err: unknown, what: "call" | "batch item failed") => {
      const fault = faultOf(err);
      if (fault === undefined) {
        logger.debug(fields, what);
        return;
      }
      const code = ConnectError.from(err).code;
      if (fault === "server") {
        const denied = code === Code.PermissionDenied;
        logger.error(
          { ...fields, err, fault },
          denied ? "store denied access" : what === "call" ? "call failed" : what,
        );
      } else {
        const refused = { ...fields, fault, reason: ConnectError.from(err).rawMessage };
        const msg = what === "call" ? "call refused" : "batch item refused";
        if (quietCodes.has(code)) logger.info(refused, msg);
        else logger.warn(refused, msg);
      }
    };
    try {
      const res = await next(req);
      if (!res.stream) {
        done();
        return res;
      }
      return {
        ...res,
        message: observeIterable(res.message, {
          onEnd: (ending) => {
            if (ending.kind === "done") done();
            else if (ending.kind === "failed") done(ending.error);
          },
        }),
      };
    } catch (err) {
      done(err);
      throw err;
    }
  };
}
