import {
  create,
  type DescMessage,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type Interceptor,
  type StreamRequest,
  type StreamResponse,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { getAbortSignalReason } from "@connectrpc/connect/protocol";

/**
 * The reason a call's signal carries once the call has completed. Aborting without a reason
 * makes Node build a DOMException, stack trace included, on every call (~27 µs per call in a
 * client profile, with connect's own runners).
 */
const callCompleted = new ConnectError("the call has completed", Code.Canceled);

/** The signal a call runs with and the two ways it ends. */
interface CallSignal {
  readonly signal: AbortSignal;
  /** Ends the call with reason (as connect does: a signal aborted first wins) and returns it. */
  fail(reason: unknown): ConnectError;
  /** Ends a call that completed. */
  done(): void;
}

/**
 * Creates a call's signal: aborted when the caller's signal aborts, at the deadline
 * (DEADLINE_EXCEEDED), when the call fails, and once it completes. One AbortController, one
 * timer and at most one listener on the caller's signal, all released when the call ends. A
 * call that fails CANCELED at or past its deadline fails DEADLINE_EXCEEDED.
 */
function callSignal(callerSignal: AbortSignal | undefined, timeoutMs: number | undefined) {
  const controller = new AbortController();
  const abort = (reason: unknown) => {
    if (!controller.signal.aborted) controller.abort(reason);
  };
  const onCallerAbort = () => abort(getAbortSignalReason(callerSignal as AbortSignal));
  let timer: NodeJS.Timeout | undefined;
  const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
  const timedOut = () => new ConnectError("the operation timed out", Code.DeadlineExceeded);
  if (timeoutMs !== undefined) {
    const expire = () => abort(timedOut());
    if (timeoutMs <= 0) expire();
    else timer = setTimeout(expire, timeoutMs);
  }
  if (callerSignal?.aborted === true) onCallerAbort();
  else callerSignal?.addEventListener("abort", onCallerAbort, { once: true });
  const release = () => {
    clearTimeout(timer);
    callerSignal?.removeEventListener("abort", onCallerAbort);
  };
  const call: CallSignal = {
    signal: controller.signal,
    fail(reason) {
      let err = controller.signal.aborted
        ? ConnectError.from(getAbortSignalReason(controller.signal), Code.Canceled)
        : ConnectError.from(reason);
      // A gRPC server resets the stream (CANCEL) at the deadline it was sent; handled before
      // this side's timer fired, that reset still means the call ran out of time.
      if (err.code === Code.Canceled && deadline !== undefined && Date.now() >= deadline) {
        err = timedOut();
      }
      abort(err);
      release();
      return err;
    },
    done() {
      release();
      abort(callCompleted);
    },
  };
  return call;
}

type UnaryFn<I extends DescMessage, O extends DescMessage> = (
  req: UnaryRequest<I, O>,
) => Promise<UnaryResponse<I, O>>;
type StreamingFn<I extends DescMessage, O extends DescMessage> = (
  req: StreamRequest<I, O>,
) => Promise<StreamResponse<I, O>>;

/** The options runUnaryCall and runStreamingCall take, as connect's runners take them. */
interface RunOptions<Req, Fn> {
  readonly req: Req;
  readonly next: Fn;
  readonly timeoutMs?: number | undefined;
  readonly signal?: AbortSignal | undefined;
  readonly interceptors?: readonly Interceptor[];
}

function applyInterceptors<Fn>(next: Fn, interceptors: readonly Interceptor[] | undefined): Fn {
  if (interceptors === undefined) return next;
  return interceptors.reduceRight<unknown>(
    (fn, interceptor) => interceptor(fn as Parameters<Interceptor>[0]),
    next,
  ) as Fn;
}

/**
 * runUnaryCall runs a unary call through the interceptors as connect's runUnaryCall does (the
 * message created from its init shape, the signal aborted by the caller's signal, the deadline
 * and a failure, every error a ConnectError) with a cheaper signal: one controller, and a
 * shared reason when the call completes.
 */
export function runUnaryCall<I extends DescMessage, O extends DescMessage>(
  opt: RunOptions<
    Omit<UnaryRequest<I, O>, "signal" | "message"> & { message: MessageInitShape<I> },
    UnaryFn<I, O>
  >,
): Promise<UnaryResponse<I, O>> {
  const next = applyInterceptors(opt.next, opt.interceptors);
  const call = callSignal(opt.signal, opt.timeoutMs);
  const req: UnaryRequest<I, O> = {
    ...opt.req,
    message: create(opt.req.method.input, opt.req.message),
    signal: call.signal,
  };
  return next(req).then(
    (res) => {
      call.done();
      return res;
    },
    (err: unknown) => Promise.reject(call.fail(err)),
  );
}

/**
 * runStreamingCall runs a streaming call as connect's runStreamingCall does: request messages
 * are created from their init shapes as they are sent; the call's signal is aborted by the
 * caller's signal, the deadline, a failure and the end of the response; once the signal is
 * aborted the request messages are closed (and thrown the reason first, if the call did not
 * complete). A caller that stops reading the response early (`return`, as `break` calls it)
 * completes the call, which cancels its stream; `throw` fails the call with its reason. Either
 * way the rest of the response is read out through the interceptors. The signal is cheaper,
 * as in runUnaryCall.
 */
export function runStreamingCall<I extends DescMessage, O extends DescMessage>(
  opt: RunOptions<
    Omit<StreamRequest<I, O>, "signal" | "message"> & {
      message: AsyncIterable<MessageInitShape<I>>;
    },
    StreamingFn<I, O>
  >,
): Promise<StreamResponse<I, O>> {
  const next = applyInterceptors(opt.next, opt.interceptors);
  const call = callSignal(opt.signal, opt.timeoutMs);
  const input = opt.req.message;
  const schema = opt.req.method.input;
  let completed = false;
  // The request messages are closed once the call ends, however it ends. What closing them
  // throws or rejects with is dropped: the call has its verdict, and an error escaping an abort
  // listener would be an uncaught exception in the caller's process.
  call.signal.addEventListener(
    "abort",
    function (this: AbortSignal) {
      const it = input[Symbol.asyncIterator]();
      const reason = this.reason;
      if (!completed) quietly(() => it.throw?.(reason));
      quietly(() => it.return?.());
    },
    { once: true },
  );
  const req: StreamRequest<I, O> = {
    ...opt.req,
    message: createdFrom(schema, input),
    signal: call.signal,
  };
  const fail = (err: unknown) => Promise.reject(call.fail(err));
  return next(req).then((res) => {
    const messages = res.message;
    return {
      ...res,
      message: {
        [Symbol.asyncIterator]() {
          const it = messages[Symbol.asyncIterator]();
          // Once the call has ended, what is left of the response is read out, so that every
          // interceptor sees the outcome and cleans up: interceptors need not implement
          // return or throw.
          const drain = async () => {
            try {
              while ((await it.next()).done !== true) {}
            } catch {
              // The outcome is the caller's; the interceptors have seen it.
            }
          };
          return {
            next: () =>
              it.next().then((r) => {
                if (r.done === true) {
                  completed = true;
                  call.done();
                }
                return r;
              }, fail),
            // A caller that stops reading (a `break` out of for await) ends the call: its
            // stream is cancelled rather than left open for the server to keep writing.
            async return(value?: unknown) {
              if (!call.signal.aborted) {
                completed = true;
                call.done();
              }
              await drain();
              return { done: true, value };
            },
            async throw(reason?: unknown) {
              if (completed) throw ConnectError.from(reason);
              const err = call.fail(reason);
              await drain();
              throw err;
            },
          };
        },
      },
    };
  }, fail);
}

/** Runs fn, dropping what it throws or the promise it returns rejects with. */
function quietly(fn: () => unknown): void {
  try {
    Promise.resolve(fn()).catch(() => undefined);
  } catch {
    // Dropped, as a rejection is.
  }
}

/** The request messages as messages of schema, each created from its init shape when read. */
function createdFrom<I extends DescMessage>(
  schema: I,
  input: AsyncIterable<MessageInitShape<I>>,
): AsyncIterable<MessageShape<I>> {
  const created = (r: IteratorResult<MessageInitShape<I>>): IteratorResult<MessageShape<I>> =>
    r.done === true ? r : { done: false, value: create(schema, r.value) };
  return {
    [Symbol.asyncIterator]() {
      const it = input[Symbol.asyncIterator]();
      const { throw: raise, return: close } = it;
      return {
        next: () => it.next().then(created),
        ...(raise === undefined ? {} : { throw: (e?: unknown) => raise.call(it, e).then(created) }),
        ...(close === undefined
          ? {}
          : { return: (v?: unknown) => close.call(it, v).then(created) }),
      };
    },
  };
}
