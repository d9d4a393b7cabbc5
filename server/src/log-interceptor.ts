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
 * batchItemFailuresKey is where a batch handler puts the list of its failed items, so that the
 * call's log shows the server faults among them although the call itself succeeds.
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
    const done = (err?: unknown) => {
      const fields = {
        procedure: req.method.name,
        requestId,
        code: err === undefined ? "ok" : Code[ConnectError.from(err).code],
        ms: Math.round(performance.now() - started),
      };
      if (!logFault(fields, err, "call failed", "store denied access")) {
        logger.debug(fields, "call");
      }
      for (const { index, error } of req.contextValues.get(batchItemFailuresKey) ?? []) {
        const item = { ...fields, item: index, code: Code[ConnectError.from(error).code] };
        logFault(item, error, "batch item failed", "batch item failed");
      }
    };
    /**
     * Logs err at error level when it is a server fault (`faultMsg`) or the store refusing the
     * server's credentials, which callers see only as PERMISSION_DENIED (`deniedMsg`); says
     * whether it logged.
     */
    const logFault = (fields: object, err: unknown, faultMsg: string, deniedMsg: string) => {
      if (err === undefined) return false;
      const failure = ConnectError.from(err);
      const denied = failure.code === Code.PermissionDenied && failure.cause !== undefined;
      if (!serverFaults.has(failure.code) && !denied) return false;
      logger.error({ ...fields, err }, denied ? deniedMsg : faultMsg);
      return true;
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
