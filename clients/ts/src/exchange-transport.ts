import type {
  DescMessage,
  DescMethodStreaming,
  DescMethodUnary,
  MessageInitShape,
  MessageShape,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createContextValues,
  type Interceptor,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from "@connectrpc/connect";
import { createMethodUrl } from "@connectrpc/connect/protocol";
import { headerGrpcStatus } from "@connectrpc/connect/protocol-grpc";
import { runStreamingCall, runUnaryCall } from "./run-call.js";

/** Exchange is a response as far as it has come: its header, then its messages and trailer. */
export interface Exchange<O extends DescMessage> {
  readonly header: Headers;
  /** Filled in when the response ends. */
  readonly trailer: Headers;
  /** The call's error when the server answered with a trailers-only response. */
  readonly headerError: ConnectError | undefined;
  readonly messages: AsyncIterable<MessageShape<O>>;
}

/**
 * ExchangeFn sends one call's request and resolves with its response's header: the one thing a
 * wire protocol supplies to createExchangeTransport. It settles every failure as a ConnectError
 * (the header promise, or the messages), and stops once `signal` aborts.
 */
export type ExchangeFn = <I extends DescMessage, O extends DescMessage>(
  method: DescMethodUnary<I, O> | DescMethodStreaming<I, O>,
  url: string,
  header: Headers,
  signal: AbortSignal,
  input: AsyncIterable<MessageShape<I>>,
) => Promise<Exchange<O>>;

/** ExchangeTransportOptions configure createExchangeTransport. */
export interface ExchangeTransportOptions {
  /** Server URL; a path is kept as a prefix of every method. */
  readonly baseUrl: string;
  /** Interceptors, outermost first. */
  readonly interceptors?: readonly Interceptor[];
  /** The protocol's request header for a call with this deadline and these user headers. */
  requestHeader(
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0] | undefined,
  ): Headers;
  /** The protocol's exchange. */
  readonly exchange: ExchangeFn;
}

/** single is a request stream of one message, for a unary or server-streaming call. */
export async function* single<T>(message: T): AsyncIterable<T> {
  yield message;
}

/**
 * createExchangeTransport returns a connect Transport over a protocol's exchange, with the
 * interceptors, deadlines, cancellation and unary checks connect's own transports have: a unary
 * call fails on a missing or extra output message, or one sent with an error status.
 *
 * A streaming call's promise may be awaited late (connect's promise client awaits it at the
 * first read): a call that fails before then never becomes an unhandled rejection.
 */
export function createExchangeTransport(opts: ExchangeTransportOptions): Transport {
  const { exchange } = opts;
  const interceptors = [...(opts.interceptors ?? [])];
  const deadline = (timeoutMs: number | undefined) =>
    timeoutMs === undefined || timeoutMs <= 0 ? undefined : timeoutMs;
  /** The request fields a unary and a streaming call share. */
  const requestFor = <M extends DescMethodUnary | DescMethodStreaming>(
    method: M,
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0] | undefined,
    contextValues: ContextValues | undefined,
  ) => ({
    service: method.parent,
    method,
    requestMethod: "POST",
    url: createMethodUrl(opts.baseUrl, method),
    header: opts.requestHeader(timeoutMs, header),
    contextValues: contextValues ?? createContextValues(),
  });
  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: ConstructorParameters<typeof Headers>[0] | undefined,
      input: MessageInitShape<I>,
      contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      const ms = deadline(timeoutMs);
      return runUnaryCall<I, O>({
        interceptors,
        signal,
        timeoutMs: ms,
        req: { stream: false, ...requestFor(method, ms, header, contextValues), message: input },
        next: async (req) => {
          const ex = await exchange(method, req.url, req.header, req.signal, single(req.message));
          let message: MessageShape<O> | undefined;
          for await (const m of ex.messages) {
            if (message !== undefined) {
              throw new ConnectError(
                "protocol error: received extra output message for unary method",
                Code.Unimplemented,
              );
            }
            message = m;
          }
          if (message === undefined) {
            if (ex.headerError !== undefined) throw ex.headerError;
            throw new ConnectError(
              "protocol error: missing output message for unary method",
              ex.trailer.has(headerGrpcStatus) ? Code.Unimplemented : Code.Unknown,
            );
          }
          if (ex.headerError !== undefined) {
            throw new ConnectError(
              "protocol error: received output message for unary method with error status",
              Code.Unknown,
            );
          }
          return {
            stream: false,
            service: method.parent,
            method,
            header: ex.header,
            message,
            trailer: ex.trailer,
          };
        },
      });
    },
    stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: ConstructorParameters<typeof Headers>[0] | undefined,
      input: AsyncIterable<MessageInitShape<I>>,
      contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      const response = (async () => {
        const ms = deadline(timeoutMs);
        return runStreamingCall<I, O>({
          interceptors,
          signal,
          timeoutMs: ms,
          req: { stream: true, ...requestFor(method, ms, header, contextValues), message: input },
          next: async (req) => {
            const ex = await exchange(method, req.url, req.header, req.signal, req.message);
            if (ex.headerError !== undefined) throw ex.headerError;
            return { ...req, header: ex.header, trailer: ex.trailer, message: ex.messages };
          },
        });
      })();
      // connect's promise client awaits a server-streaming or bidi call's response only when
      // its caller first reads it, and a caller may write requests or wait first: a call that
      // fails before then (its deadline, an abort, a refused stream) keeps its failure for that
      // read instead of being an unhandled rejection that ends the caller's process.
      response.catch(() => undefined);
      return response;
    },
  };
}
