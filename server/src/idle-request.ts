import type { Interceptor } from "@connectrpc/connect";
import { createIdleStreamReader } from "./idle-stream.js";

/**
 * idleRequest yields a call's request messages as they arrive, failing with DEADLINE_EXCEEDED
 * ("<what> sent nothing for <idleMs> ms") when the client lets idleMs pass without the next
 * message, or without ending its side of the stream after the last one. The clock starts when
 * idleRequest is called, so a call whose request never comes ends idleMs after it arrived;
 * only time spent waiting for the client counts. The wrapped stream is let go of (`return`)
 * once this one ends, fails or is abandoned.
 */
export function idleRequest<T>(
  source: AsyncIterable<T>,
  idleMs: number,
  signal: AbortSignal,
  what: string,
): AsyncIterable<T> {
  const it = source[Symbol.asyncIterator]();
  const reader = createIdleStreamReader(it, idleMs, signal, what);
  const letGo = () => {
    reader.close();
    // A read still waiting on a silent client settles once its stream closes.
    void it.return?.()?.catch(() => undefined);
  };
  return {
    [Symbol.asyncIterator]: () => ({
      async next() {
        try {
          const step = await reader.next();
          if (step.done === true) reader.close();
          return step;
        } catch (err) {
          letGo();
          throw err;
        }
      },
      async return() {
        letGo();
        return { done: true, value: undefined };
      },
    }),
  };
}

/**
 * createRequestIdleLimit bounds, on every protocol, how long a server-streaming call (a
 * ReadToolOutput) may wait for its request: the request must arrive and the client must end
 * its side within idleMs of the call's arrival, or the call ends with DEADLINE_EXCEEDED and
 * frees whatever admission gave it (a tenant's call slot, reserved bytes). Unary requests are
 * read before interceptors run, by the transport, which bounds them the same way
 * (grpc-node-handler.ts on the direct gRPC path, request-arrival.ts for every call connect
 * answers); client-streaming calls bound the time between messages themselves (Offload,
 * idle-stream.ts). It runs last among the interceptors, so only admitted calls start a timer.
 */
export function createRequestIdleLimit(idleMs: number): Interceptor {
  return (next) => (req) => {
    if (!req.stream || req.method.methodKind !== "server_streaming") return next(req);
    return next({
      ...req,
      message: idleRequest(req.message, idleMs, req.signal, `the ${req.method.name} request`),
    });
  };
}
