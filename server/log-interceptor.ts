import { randomUUID } from "node:crypto";
import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";

/** Codes that mean the server or its store failed, as opposed to a caller's mistake. */
const serverFaults = new Set([Code.Internal, Code.Unknown, Code.DataLoss, Code.Unavailable]);

/**
 * createLogInterceptor writes one structured line per call — procedure, request id, code,
 * duration — at debug level, and at error level when the server or its store failed (including
 * a store that refuses the server's credentials, which callers see only as PERMISSION_DENIED). Messages
 * of server faults are logged but never echoed beyond what the handler already put in them.
 */
export function createLogInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const requestId = req.header.get("x-request-id") ?? randomUUID();
    const done = (err?: unknown) => {
      const code = err === undefined ? undefined : ConnectError.from(err).code;
      const fields = {
        procedure: req.method.name,
        requestId,
        code: code === undefined ? "ok" : Code[code],
        ms: Math.round(performance.now() - started),
      };
      if (code !== undefined && serverFaults.has(code)) {
        logger.error({ ...fields, err }, "call failed");
      } else if (code === Code.PermissionDenied && ConnectError.from(err).cause !== undefined) {
        // The store refused our credentials: a server misconfiguration the caller never sees.
        logger.error({ ...fields, err }, "store denied access");
      } else {
        logger.debug(fields, "call");
      }
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
