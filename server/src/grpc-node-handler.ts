import type { Http2ServerRequest, Http2ServerResponse, ServerHttp2Stream } from "node:http2";
import { constants as h2 } from "node:http2";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createContextValues,
  type HandlerContext,
  type MethodImplSpec,
  type ServiceImplSpec,
} from "@connectrpc/connect";
import {
  createMethodSerializationLookup,
  invokeUnaryImplementation,
  type Serialization,
  type UniversalHandlerOptions,
  validateUniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import {
  contentTypeProto,
  grpcStatusOk,
  parseContentType,
  parseTimeout,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
import { fromResetCode, toNodeHeaders } from "@spillway/wire";
import { createEarlyAnswers, type EarlyAnswers } from "./early-answers.js";
import {
  createResponseFramer,
  type GrpcWireOptions,
  parseEnvelopes,
  type ResponseFramer,
  requestChunkReleaseKey,
} from "./grpc-wire.js";
import { invokeStreaming } from "./invoke-streaming.js";
import { readSingle } from "./read-single.js";
import { readableChunks } from "./readable-chunks.js";

/** GrpcNodeCalls are what createGrpcNodeHandler serves and how. */
export interface GrpcNodeCalls {
  /** The services served, with their implementations. */
  readonly services: readonly ServiceImplSpec[];
  /** How message bytes move to and from the wire (see grpc-wire.ts). */
  readonly wire: GrpcWireOptions;
  /** The context values a call starts with. */
  readonly contextValues?: (req: Http2ServerRequest) => ContextValues;
  /**
   * Longest a call may wait on its client: for a unary call's request to arrive (and the
   * client's side to end), and for the client to read when the response cannot be written.
   * Unset: no bound (server-streaming requests are bounded by createRequestIdleLimit).
   */
  readonly idleStreamMs?: number;
}

/**
 * GrpcNodeHandler serves one request if it can: true when it took the request (and will answer
 * it), false when the caller must hand it to another handler untouched.
 */
export type GrpcNodeHandler = (req: Http2ServerRequest, res: Http2ServerResponse) => boolean;

/**
 * createGrpcNodeHandler returns a handler for gRPC calls that arrive over HTTP/2 as binary,
 * uncompressed messages (content type `application/grpc` or `application/grpc+proto`, no
 * `grpc-encoding` other than `identity`, a valid `grpc-timeout` or none): the calls every gRPC
 * client makes. It answers them the way connect's gRPC handler does (the same interceptors run
 * in the same order, the same context, statuses in the same trailers, the same errors for
 * malformed envelopes and oversized messages, response messages framed by `wire.framer`), but
 * reads the request from and writes the response to Node's own request and response, without
 * connect-node's translation into fetch-style requests, headers, signals and body pipelines and
 * back: measured on GetServerInfo, that translation was most of a small call's CPU.
 *
 * `options.requestGate`, when set, runs before any of the request is read, as connect runs it;
 * what it throws ends the call with that error.
 *
 * It declines everything else (HTTP/1.1, gRPC-Web, Connect, JSON, compressed messages, unknown
 * paths, malformed or too long timeouts) so that connect answers those as before. `options`
 * are the handler options connect's protocol handlers take (interceptors, message limits,
 * the longest timeout), read with the same defaults.
 *
 * A call's signal is aborted when the call ends: with `callEnded` once the response is
 * complete, with the error the call failed with, or with CANCELED (or the code matching the
 * RST_STREAM the client sent) when the stream closes first.
 *
 * With `calls.idleStreamMs`, a unary call whose request is not complete that long after it
 * arrived ends with DEADLINE_EXCEEDED, and a call whose response waits that long for a client
 * that reads nothing has its stream reset (RST_STREAM CANCEL: no status could pass the
 * unread frames) and ends with DEADLINE_EXCEEDED, freeing what admission gave it.
 */
export function createGrpcNodeHandler(
  options: Partial<UniversalHandlerOptions>,
  calls: GrpcNodeCalls,
): GrpcNodeHandler {
  const opts = validateUniversalHandlerOptions(options);
  const earlyAnswers = createEarlyAnswers();
  const methods = binaryMethods(calls.services, opts);
  return (req, res) => {
    const call = directCallOf(methods, req, binaryGrpc, opts.maxTimeoutMs);
    if (call === undefined) return false;
    serve(call.method, req, res, call.timeoutMs, opts, calls, earlyAnswers).catch(() => {
      // Unreachable by design (serve settles every call itself); should it happen, the client
      // sees its stream reset instead of waiting forever.
      req.stream.close(h2.NGHTTP2_INTERNAL_ERROR);
    });
    return true;
  };
}

/** The protocol name calls report in their HandlerContext, as connect's gRPC handler does. */
const protocolName = "grpc";
/** The only HTTP method a gRPC or gRPC-Web call arrives with. */
const methodPost = "POST";
/**
 * The reason a call's signal carries once its response has ended normally. Connect aborts it
 * without one, and Node then builds a DOMException, stack trace included, for every call.
 */
export const callEnded = new ConnectError("the call has ended", Code.Canceled);

/** Whether a content type is gRPC's binary one (`application/grpc`, `+proto`). */
function binaryGrpc(contentType: string | null): boolean {
  return parseContentType(contentType)?.binary === true;
}

/** DirectCall is a request a direct handler takes: the method it calls and its deadline. */
export interface DirectCall {
  readonly method: Method;
  /** The client's `grpc-timeout`, if it sent one. */
  readonly timeoutMs: number | undefined;
}

/**
 * directCallOf returns the call a request makes when a direct handler may serve it: a POST to
 * a served path, with a content type `binary` accepts, no `grpc-encoding` but `identity` and a
 * valid `grpc-timeout` (or none). Anything else is undefined, for connect to answer.
 */
export function directCallOf(
  methods: ReadonlyMap<string, Method>,
  req: {
    readonly method?: string | undefined;
    readonly url?: string | undefined;
    readonly headers: {
      readonly "content-type"?: string | undefined;
      readonly "grpc-encoding"?: string | string[] | undefined;
      readonly "grpc-timeout"?: string | string[] | undefined;
    };
  },
  binary: (contentType: string | null) => boolean,
  maxTimeoutMs: number,
): DirectCall | undefined {
  if (req.method !== methodPost) return undefined;
  const method = methods.get(req.url ?? "");
  if (method === undefined) return undefined;
  const { headers } = req;
  if (!binary(headers["content-type"] ?? null)) return undefined;
  const encoding = headers["grpc-encoding"];
  if (encoding !== undefined && encoding !== "identity") return undefined;
  const timeout = parseTimeout(single(headers["grpc-timeout"]), maxTimeoutMs);
  if (timeout.error !== undefined) return undefined;
  return { method, timeoutMs: timeout.timeoutMs };
}

/** Method is one RPC a direct handler serves: its implementation and binary serializations. */
export interface Method {
  readonly spec: MethodImplSpec;
  readonly input: Serialization<MessageShape<DescMessage>>;
  readonly output: Serialization<MessageShape<DescMessage>>;
}

/** binaryMethods maps each method's path (`/package.Service/Method`) to what serves it. */
export function binaryMethods(
  services: readonly ServiceImplSpec[],
  opts: UniversalHandlerOptions,
): Map<string, Method> {
  const methods = new Map<string, Method>();
  for (const service of services) {
    for (const spec of Object.values(service.methods)) {
      const serialization = createMethodSerializationLookup(
        spec.method,
        opts.binaryOptions,
        opts.jsonOptions,
        opts,
      );
      methods.set(`/${service.service.typeName}/${spec.method.name}`, {
        spec,
        input: serialization.getI(true),
        output: serialization.getO(true),
      });
    }
  }
  return methods;
}

async function serve(
  method: Method,
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  timeoutMs: number | undefined,
  opts: UniversalHandlerOptions,
  calls: GrpcNodeCalls,
  earlyAnswers: EarlyAnswers,
): Promise<void> {
  const { spec } = method;
  const { requestChunks, framer, recycle } = calls.wire;
  const values = calls.contextValues?.(req) ?? createContextValues();
  if (requestChunks !== undefined) values.set(requestChunkReleaseKey, requestChunks.give);
  const context = createCallContext(
    spec,
    {
      protocolName,
      url: `${req.scheme}://${req.authority}${req.url}`,
      contentType: contentTypeProto,
    },
    requestHeaderOf(req.rawHeaders),
    timeoutMs,
    values,
  );
  let ended = false;
  // A stream that closes before the response is complete was cancelled or reset by the
  // client (or by the server's deadline): the handler's signal says so at once.
  req.stream.once("close", () => {
    if (!ended) context.abort(closedError(req.stream));
  });
  const framing = createResponseFramer(
    method.output,
    framer,
    opts.writeMaxBytes,
    recycle,
    req.stream,
  );
  const { idleStreamMs } = calls;
  const name = spec.method.name;
  const reading: Reading = { idleMs: idleStreamMs, name };
  let failure: unknown;
  try {
    // As in connect's handlers: the gate decides before any request byte is read.
    if (opts.requestGate !== undefined) await opts.requestGate(context);
    if (spec.kind === "unary") {
      // One timer that fails the request's body, not a per-read race: a small call's read is
      // over in microseconds, and the timer is all it costs.
      const late =
        idleStreamMs === undefined
          ? undefined
          : setTimeout(() => {
              if (req.complete) return;
              req.destroy(
                new ConnectError(
                  `the ${name} request sent nothing for ${idleStreamMs} ms`,
                  Code.DeadlineExceeded,
                ),
              );
            }, idleStreamMs);
      // The client's grpc-timeout bounds the wait for its request too.
      const expire = () => {
        if (!req.complete) req.destroy(context.signal.reason);
      };
      if (context.signal.aborted) expire();
      else context.signal.addEventListener("abort", expire, { once: true });
      let input: MessageShape<DescMessage>;
      try {
        input = await readSingle(
          parseEnvelopes(requestBody(req), opts.readMaxBytes, method.input, undefined),
          "unary",
        );
      } finally {
        clearTimeout(late);
        context.signal.removeEventListener("abort", expire);
      }
      const output = await invokeUnaryImplementation(spec, context, input, opts.interceptors);
      await writeMessage(res, context, framing.frame(output), reading);
    } else {
      const input = parseEnvelopes(
        requestBody(req),
        opts.readMaxBytes,
        method.input,
        requestChunks,
      );
      const messages = invokeStreaming(spec, context, input, opts.interceptors);
      await writeMessages(messages, framing, (parts) => writeMessage(res, context, parts, reading));
    }
  } catch (err) {
    failure = err;
  }
  ended = true;
  context.abort(failure ?? callEnded);
  const stream = req.stream;
  if (!stream.destroyed && !stream.readableEnded && earlyAnswers.mustWait(stream.session)) {
    await requestEnd(stream);
  }
  if (!stream.destroyed && !stream.readableEnded) earlyAnswers.answered(stream.session);
  finish(res, context, failure);
  drainUnreadRequest(req.stream);
}

/** CallContext is a call's HandlerContext and the means to end its signal. */
export interface CallContext extends HandlerContext {
  /** Aborts the call's signal with reason (once) and stops its deadline timer. */
  abort(reason: unknown): void;
}

/**
 * Builds a call's context as connect's createHandlerContext does (the same fields, headers
 * copied from the request, a signal aborted with DEADLINE_EXCEEDED at the client's deadline)
 * with one AbortController and a timer instead of three controllers linked by listeners:
 * connect's took ~35 µs per call here, most of a small call's context cost.
 */
export function createCallContext(
  spec: MethodImplSpec,
  call: { readonly protocolName: string; readonly url: string; readonly contentType: string },
  requestHeader: [string, string][],
  timeoutMs: number | undefined,
  values: ContextValues,
): CallContext {
  const controller = new AbortController();
  const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
  const expire = () =>
    controller.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
  let timer: NodeJS.Timeout | undefined;
  if (timeoutMs !== undefined) {
    if (timeoutMs <= 0) expire();
    else timer = setTimeout(expire, timeoutMs);
  }
  return {
    method: spec.method,
    service: spec.method.parent,
    requestMethod: methodPost,
    protocolName: call.protocolName,
    url: call.url,
    signal: controller.signal,
    timeoutMs: () => (deadline === undefined ? undefined : deadline - Date.now()),
    requestHeader: new Headers(requestHeader),
    responseHeader: new Headers({ "content-type": call.contentType }),
    responseTrailer: new Headers({ "grpc-status": grpcStatusOk }),
    values,
    abort(reason) {
      clearTimeout(timer);
      if (!controller.signal.aborted) controller.abort(reason);
    },
  };
}

/**
 * writeMessages frames each message and hands its parts to `write` (which sends the response
 * headers before the first, and waits for the response to drain whenever it asks to). A failed
 * write is thrown into the messages, so interceptors watching them see the call fail with it
 * (as connect-node does), and then out of this function.
 */
export async function writeMessages(
  messages: AsyncIterable<MessageShape<DescMessage>>,
  framing: ResponseFramer,
  write: (parts: readonly Uint8Array[]) => Promise<void>,
): Promise<void> {
  const it = messages[Symbol.asyncIterator]();
  for (;;) {
    const step = await it.next();
    if (step.done === true) return;
    try {
      await write(framing.frame(step.value));
    } catch (err) {
      await it.throw?.(err).catch(() => undefined);
      throw err;
    }
  }
}

/** How long a response may wait for its client to read (undefined: for ever), and its method. */
interface Reading {
  readonly idleMs: number | undefined;
  readonly name: string;
}

async function writeMessage(
  res: Http2ServerResponse,
  context: HandlerContext,
  parts: readonly Uint8Array[],
  reading: Reading,
): Promise<void> {
  if (!res.headersSent) res.writeHead(200, toNodeHeaders(context.responseHeader));
  for (const part of parts) {
    if (!res.write(part)) await drained(res, reading);
  }
}

/** Ends the response with the call's status in its trailers, unless the stream is gone. */
function finish(res: Http2ServerResponse, context: HandlerContext, failure: unknown): void {
  if (res.stream.destroyed || res.writableEnded) return;
  setFailureStatus(context.responseTrailer, failure);
  if (!res.headersSent) res.writeHead(200, toNodeHeaders(context.responseHeader));
  res.addTrailers(toNodeHeaders(context.responseTrailer));
  res.end();
}

/**
 * setFailureStatus puts the status of the error a call failed with into its trailers, as
 * connect does: a ConnectError's own, INTERNAL for anything else; nothing when it succeeded.
 */
export function setFailureStatus(trailer: Headers, failure: unknown): void {
  if (failure === undefined) return;
  setTrailerStatus(
    trailer,
    failure instanceof ConnectError
      ? failure
      : new ConnectError("internal error", Code.Internal, undefined, undefined, failure),
  );
}

/**
 * How much more of a request the server reads, and how long it waits, for the request to end
 * before answering a call that ended first, on a connection that has spent its early answers.
 */
const heldAnswerBytes = 8 * 1024 * 1024;
const heldAnswerMs = 2_000;

/**
 * Resolves once the client has ended the request (at once if it had), or once heldAnswerBytes
 * more of it arrived, heldAnswerMs passed or the stream closed first; what arrives meanwhile is
 * read and dropped. A request that ends before its answer arrives closes the stream from both
 * sides, so a gRPC C-core client has nothing to reset (see createEarlyAnswers). Resetting the
 * stream from the server right after the answer instead (RFC 9113 §8.1) is no way out: C-core
 * then reports INTERNAL rather than the call's status.
 */
function requestEnd(stream: ServerHttp2Stream): Promise<void> {
  if (stream.destroyed || stream.readableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    let left = heldAnswerBytes;
    const done = () => {
      clearTimeout(timer);
      stream.off("data", discard);
      stream.off("end", done);
      stream.off("close", done);
      resolve();
    };
    const discard = (chunk: Buffer) => {
      left -= chunk.byteLength;
      if (left < 0) done();
    };
    const timer = setTimeout(done, heldAnswerMs).unref();
    // As in drainUnreadRequest: the bytes go from the HTTP/2 stream straight to nowhere.
    stream.removeAllListeners("data");
    stream.on("data", discard);
    stream.once("end", done);
    stream.once("close", done);
    stream.resume();
  });
}

/**
 * How much of a request a client may still send once its call has been answered, and for how
 * long, before the server resets the stream: more than the rest of the largest message a
 * client may be writing, and time to send it.
 */
const unreadRequestBytes = 16 * 1024 * 1024;
const unreadRequestMs = 5_000;

/**
 * Discards what is left of a request whose call was answered before all of it was read
 * (refused at its header, or failed part way), so that the stream closes and is freed however
 * the client stops. A client that ends its side, as Spillway's SDK does rather than reset the
 * stream (nghttp2 shuts a connection past 1,000 client resets at once, 33 a second after, and
 * Node then leaves the calls on it hanging), has the rest read and dropped. And a stream no
 * longer closes with unread bytes, which Node frees only once they are read: 1,000 such
 * streams made Node refuse every new call on the connection with ENHANCE_YOUR_CALM. A client
 * that sends more than unreadRequestBytes, or takes longer than unreadRequestMs, is reset with
 * NO_ERROR, as RFC 9113 §8.1 provides for a request the server no longer needs.
 */
function drainUnreadRequest(stream: ServerHttp2Stream): void {
  if (stream.destroyed || stream.readableEnded) return;
  let left = unreadRequestBytes;
  const reset = () => {
    clearTimeout(timer);
    if (!stream.destroyed) stream.close(h2.NGHTTP2_NO_ERROR);
  };
  const discard = (chunk: Buffer) => {
    left -= chunk.byteLength;
    if (left < 0) reset();
  };
  const timer = setTimeout(reset, unreadRequestMs).unref();
  stream.once("close", () => clearTimeout(timer));
  // The bytes go straight from the HTTP/2 stream to nowhere. Left to the compatibility layer's
  // request, which pauses the stream whenever its own buffer fills and lets go of the stream
  // when it closes, a stream that closed while paused kept its buffered bytes and its slot for
  // the connection's lifetime (Node destroys a closed stream only once its data is read).
  stream.removeAllListeners("data");
  stream.on("data", discard);
  stream.resume();
}

/**
 * Resolves once the response drains; rejects when it closes or fails first, or when the client
 * has read nothing for reading.idleMs: the stream is then reset with CANCEL.
 */
function drained(res: Http2ServerResponse, reading: Reading): Promise<void> {
  return new Promise((resolve, reject) => {
    const { idleMs } = reading;
    const stalled =
      idleMs === undefined
        ? undefined
        : setTimeout(() => {
            done(
              new ConnectError(
                `the client read nothing of the ${reading.name} response for ${idleMs} ms`,
                Code.DeadlineExceeded,
              ),
            );
            res.stream.close(h2.NGHTTP2_CANCEL);
          }, idleMs);
    const done = (err?: unknown) => {
      clearTimeout(stalled);
      res.off("drain", onDrain);
      res.off("close", onClose);
      res.off("error", done);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onDrain = () => done();
    const onClose = () => done(closedError(res.stream));
    res.once("drain", onDrain);
    res.once("close", onClose);
    res.once("error", done);
  });
}

/**
 * What may wait between the request stream and the call's parser before the stream is paused
 * (and HTTP/2 flow control holds the client back): one default chunk's worth. Chunks are
 * passed on as they arrived, unmerged, which made 256 MiB offloads 4-11 % faster than merging
 * them; a 64 KiB bound was no faster.
 */
const requestQueueBytes = 1024 * 1024;

/** The request's body as the chunks it arrived in (see readableChunks). */
function requestBody(req: Http2ServerRequest): AsyncIterable<Uint8Array> {
  return readableChunks(req, requestQueueBytes);
}

/** The request's header fields, HTTP/2 pseudo-headers left out. */
export function requestHeaderOf(raw: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.startsWith(":")) continue;
    out.push([name, raw[i + 1] as string]);
  }
  return out;
}

/** The first value of a Node header, or null. */
function single(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return typeof value === "string" ? value : (value[0] ?? null);
}

/**
 * The error a call whose stream closed early ends with: CANCELED when its connection is gone
 * (the caller went away: Node closes the streams of a reset socket with an INTERNAL_ERROR of
 * its own making, which no peer sent and which is no server fault), else the one its reset
 * code stands for (as the SDK maps it), or CANCELED for a close that carries no verdict.
 */
function closedError(stream: ServerHttp2Stream): ConnectError {
  if (stream.session === undefined || stream.session.destroyed) {
    return new ConnectError("the connection closed before the call ended", Code.Canceled);
  }
  return (
    fromResetCode(stream.rstCode) ??
    new ConnectError("the stream closed before the call ended", Code.Canceled)
  );
}
