import type * as http from "node:http";
import * as http2 from "node:http2";
import type { ContextValues, Interceptor } from "@connectrpc/connect";
import { Code, ConnectError, createContextKey, createContextValues } from "@connectrpc/connect";
import { Health } from "@spillway/proto/grpc/health/v1/health_pb.js";
import { abortReason, raceAbort } from "./backends/body.js";

type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

/** serverDeadlineKey carries a call's server deadline, as a signal, from the request to the interceptor. */
const serverDeadlineKey = createContextKey<AbortSignal | undefined>(undefined, {
  description: "aborted when the call reaches the server's request deadline",
});

/** RequestDeadlines enforce `--request-deadline-ms` and the client's `grpc-timeout`. */
export interface RequestDeadlines {
  /**
   * Wraps the server's request handler: each call's server deadline starts when it arrives, and
   * at the deadline a response stuck behind a client that stopped reading is reset
   * (RST_STREAM CANCEL), since no status could reach that client anyway.
   */
  wrap<H extends (req: NodeRequest, res: NodeResponse) => void>(handler: H): H;
  /** For connectNodeAdapter's `contextValues`: hands the call's deadline to the interceptor. */
  contextValues(req: NodeRequest): ContextValues;
  /**
   * Ends every call still running at its deadline with DEADLINE_EXCEEDED: the earlier of the
   * client's `grpc-timeout` (which connect-node turns into an abort of the call's signal) and
   * the server's. The answer goes out at the deadline even when the handler is waiting on the
   * client or the store, and the handler's signal is aborted at the same moment, so its store
   * calls, uploads and open reads are released. A streamed response ends after the messages
   * already sent.
   */
  readonly interceptor: Interceptor;
}

/**
 * createRequestDeadlines bounds every call by deadlineMs from its arrival (unset or 0: only by
 * the client's deadline). Health checks, whose Watch streams are meant to last, are exempt.
 * Every timer is cleared when its call ends.
 */
export function createRequestDeadlines(deadlineMs: number | undefined): RequestDeadlines {
  const enforced = deadlineMs !== undefined && deadlineMs > 0;
  const deadlines = new WeakMap<NodeRequest, AbortSignal>();
  return {
    wrap(handler) {
      if (!enforced) return handler;
      const wrapped = (req: NodeRequest, res: NodeResponse) => {
        if (req.url?.startsWith(`/${Health.typeName}/`) !== true) {
          const controller = new AbortController();
          deadlines.set(req, controller.signal);
          const timer = setTimeout(() => {
            const expired = new ConnectError(
              `the call ran longer than the server's request deadline of ${deadlineMs} ms`,
              Code.DeadlineExceeded,
            );
            controller.abort(expired);
            // A unary request is read whole before any interceptor runs: one whose client
            // never ends it fails its read here, and its transport answers the deadline.
            if (!req.complete) req.destroy(expired);
            // The abort ends a response that is still producing. One whose write waits for a
            // client that stopped reading is still open once the abort has run its course.
            setImmediate(() => resetStalled(res, expired));
          }, deadlineMs);
          res.once("close", () => clearTimeout(timer));
        }
        handler(req, res);
      };
      return wrapped as typeof handler;
    },
    contextValues(req) {
      return createContextValues().set(serverDeadlineKey, deadlines.get(req));
    },
    interceptor: (next) => async (req) => {
      if (req.service.typeName === Health.typeName) return next(req);
      const serverDeadline = req.contextValues.get(serverDeadlineKey);
      const signal =
        serverDeadline === undefined ? req.signal : AbortSignal.any([req.signal, serverDeadline]);
      let stopWatching = () => {};
      const expired = new Promise<never>((_, reject) => {
        const fail = () => reject(abortReason(signal));
        if (signal.aborted) fail();
        else signal.addEventListener("abort", fail, { once: true });
        stopWatching = () => signal.removeEventListener("abort", fail);
      });
      // Only the races below observe it; a call that ends first leaves it pending.
      expired.catch(() => {});
      try {
        const res = await Promise.race([next({ ...req, signal }), expired]);
        if (!res.stream) {
          stopWatching();
          return res;
        }
        return { ...res, message: endAtDeadline(res.message, signal, stopWatching) };
      } catch (err) {
        stopWatching();
        throw err;
      }
    },
  };
}

/**
 * resetStalled resets a response whose pending write waits for the client to read, and does
 * nothing to one that is not waiting. connect-node waits for that write's "drain" or "error",
 * and a reset stream emits neither, so the error is handed to the waiting write: the call then
 * unwinds like any failed call, releasing its slot.
 */
export function resetStalled(res: NodeResponse, reason: ConnectError): void {
  if (res.writableEnded) return;
  if (res instanceof http2.Http2ServerResponse) {
    if (!res.stream.writableNeedDrain) return;
    res.stream.close(http2.constants.NGHTTP2_CANCEL);
  } else {
    if (!res.writableNeedDrain) return;
    res.destroy();
  }
  if (res.listenerCount("error") > 0) res.emit("error", reason);
}

/** Yields the source's messages until it ends or the signal aborts, then calls release once. */
function endAtDeadline<T>(
  source: AsyncIterable<T>,
  signal: AbortSignal,
  release: () => void,
): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      const it = source[Symbol.asyncIterator]();
      return {
        async next() {
          try {
            // Not Promise.race against one long-lived deadline promise: each race would leave a
            // reaction on it holding its message, so a stream would keep all it sent until the end.
            const step = await raceAbort(it.next(), signal);
            if (step.done === true) release();
            return step;
          } catch (err) {
            release();
            // The handler was aborted with the call; closing it frees what it still holds.
            void it.return?.()?.catch(() => undefined);
            throw err;
          }
        },
        async return(value?: unknown) {
          release();
          return (await it.return?.(value)) ?? { done: true, value: undefined };
        },
      };
    },
  };
}
