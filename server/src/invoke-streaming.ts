import {
  create,
  type DescMessage,
  type DescMethodServerStreaming,
  isMessage,
  type MessageShape,
} from "@bufbuild/protobuf";
import type {
  HandlerContext,
  Interceptor,
  MethodImplSpec,
  StreamRequest,
  StreamResponse,
} from "@connectrpc/connect";
import { transformInvokeImplementation } from "@connectrpc/connect/protocol";
import { readSingle } from "./read-single.js";
import { throwInto } from "./throw-into.js";

/** The implementation spec of a streaming method (client-, server- or bidi-streaming). */
export type StreamingSpec = Exclude<MethodImplSpec, { kind: "unary" }>;

/** The implementation spec of a server-streaming method. */
type ServerStreamingSpec = Extract<MethodImplSpec, { kind: "server_streaming" }>;

type StreamingFn = (
  req: StreamRequest<DescMessage, DescMessage>,
) => Promise<StreamResponse<DescMessage, DescMessage>>;

/**
 * invokeStreaming runs a streaming call's implementation through the interceptors, `input` its
 * request messages, and returns its response messages, as connect's
 * transformInvokeImplementation does. Server-streaming calls (windows, the hot path) take
 * invokeServerStreaming; client-streaming and bidi calls take connect's own.
 */
export function invokeStreaming(
  spec: StreamingSpec,
  context: HandlerContext,
  input: AsyncIterable<MessageShape<DescMessage>>,
  interceptors: Interceptor[],
): AsyncIterable<MessageShape<DescMessage>> {
  return spec.kind === "server_streaming"
    ? invokeServerStreaming(spec, context, input, interceptors)
    : transformInvokeImplementation(spec, context, interceptors)(input);
}

/**
 * invokeServerStreaming runs a server-streaming call as connect's transformInvokeImplementation
 * does: the interceptors in order around a request whose message stream is `input`; the
 * implementation given that stream's one message (none, or a second, is UNIMPLEMENTED) and the
 * call's context with what the interceptors changed (headers, signal, context values); its
 * outputs as messages; the response's header and trailer copied into the call's context.
 * Native iteration takes the place of connect's down-levelled generators, which handed every
 * message through several promise hops more.
 */
async function* invokeServerStreaming(
  spec: ServerStreamingSpec,
  context: HandlerContext,
  input: AsyncIterable<MessageShape<DescMessage>>,
  interceptors: readonly Interceptor[],
): AsyncGenerator<MessageShape<DescMessage>> {
  const { method } = spec;
  const innermost: StreamingFn = async (req) => ({
    stream: true,
    service: method.parent,
    method,
    header: context.responseHeader,
    trailer: context.responseTrailer,
    message: asMessages(
      method,
      spec.impl(await readSingle(req.message, "server-streaming"), {
        ...context,
        service: req.service,
        requestHeader: req.header,
        signal: req.signal,
        values: req.contextValues,
      }),
    ),
  });
  const next = interceptors.reduceRight<StreamingFn>(
    (fn, interceptor) => interceptor(fn as Parameters<Interceptor>[0]) as StreamingFn,
    innermost,
  );
  const res = await next({
    stream: true,
    service: method.parent,
    method,
    requestMethod: context.requestMethod,
    url: context.url,
    signal: context.signal,
    header: context.requestHeader,
    contextValues: context.values,
    message: input,
  });
  copyHeaders(res.header, context.responseHeader);
  yield* res.message;
  copyHeaders(res.trailer, context.responseTrailer);
}

/** The outputs of an implementation as messages of the method's output type. */
function asMessages(
  method: DescMethodServerStreaming,
  outputs: AsyncIterable<unknown>,
): AsyncIterable<MessageShape<DescMessage>> {
  const desc = method.output;
  const toMessage = (step: IteratorResult<unknown>): IteratorResult<MessageShape<DescMessage>> =>
    step.done === true
      ? step
      : {
          done: false,
          value: isMessage(step.value, desc)
            ? step.value
            : create(desc, step.value as Parameters<typeof create>[1]),
        };
  return {
    [Symbol.asyncIterator]() {
      const it = outputs[Symbol.asyncIterator]();
      return {
        next: () => it.next().then(toMessage),
        return: async (value?: unknown) =>
          it.return === undefined
            ? { done: true, value: undefined }
            : toMessage(await it.return(value)),
        throw: async (err?: unknown) => toMessage(await throwInto(it, err)),
      };
    },
  };
}

/** Replaces what `to` holds with what `from` holds, unless they are one object. */
function copyHeaders(from: Headers, to: Headers): void {
  if (from === to) return;
  for (const key of [...to.keys()]) to.delete(key);
  from.forEach((value, key) => {
    to.set(key, value);
  });
}
