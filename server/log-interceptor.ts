import { randomUUID } from "node:crypto";
import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";
import type { Logger } from "pino";

/** BatchItemFailure is one failed item of a batch call: its index and what it failed with. */
export interface BatchItemFailure {
  readonly index: number;
  readonly error: unknown;
}

/**
 * batchItemFailuresKey is where a batch handler reports its failed items, so that the call's
 * log shows the server faults among them although the call itself succeeds.
 */
export const batchItemFailuresKey = createContextKey<BatchItemFailure[] | undefined>(undefined, {
  description: "failed items of a batch call",
});

/** Codes that mean the server or its store failed, as opposed to a caller's mistake. */
const serverFaults = new Set([Code.Internal, Code.Unknown, Code.DataLoss, Code.Unavailable]);

/**
 * createLogInterceptor writes one structured line per call — procedure, request id, code,
 * duration — at debug level, and at error level when the server or its store failed (including
 * a store that refuses the server's credentials, which callers see only as PERMISSION_DENIED),
 * plus one error line per batch item that failed that way (see batchItemFailuresKey). Messages
 * of server faults are logged but never echoed beyond what the handler already put in them.
 */
export function createLogInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const requestId = req.header.get("x-request-id") ?? randomUUID();
    const itemFailures: BatchItemFailure[] = [];
    if (!req.stream) req.contextValues.set(batchItemFailuresKey, itemFailures);
    const done = (err?: unknown) => {
      const fields = {
        procedure: req.method.name,
        requestId,
        code: err === undefined ? "ok" : Code[ConnectError.from(err).code],
        ms: Math.round(performance.now() - started),
      };
      if (!logFault(fields, err, "call failed")) logger.debug(fields, "call");
      for (const { index, error } of itemFailures) {
        logFault(
          { ...fields, item: index, code: Code[ConnectError.from(error).code] },
          error,
          "batch item failed",
        );
      }
    };
    /** Logs err at error level when it is a server fault; says whether it was one. */
    const logFault = (fields: object, err: unknown, msg: string): boolean => {
      if (err === undefined) return false;
      const failure = ConnectError.from(err);
      if (serverFaults.has(failure.code)) {
        logger.error({ ...fields, err }, msg);
        return true;
      }
      if (failure.code === Code.PermissionDenied && failure.cause !== undefined) {
        // The store refused our credentials: a server misconfiguration the caller never sees.
        logger.error({ ...fields, err }, msg === "call failed" ? "store denied access" : msg);
        return true;
      }
      return false;
    };
    try {
      const res = await next(req);
      if (!res.stream) {
        done();
        return res;
      }
      const messages = res.message;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* messages;
            done();
          } catch (err) {
            done(err);
            throw err;
          }
        })(),
      };
    } catch (err) {
      done(err);
      throw err;
    }
  };
}
