import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { constants as h2 } from "node:http2";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createContextValues,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type ServiceImplSpec,
} from "@connectrpc/connect";
import {
  createMethodSerializationLookup,
  invokeUnaryImplementation,
  type Serialization,
  transformInvokeImplementation,
} from "@connectrpc/connect/protocol";
import {
  contentTypeProto,
  grpcStatusOk,
  parseContentType,
  parseTimeout,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
import { createEnvelopeReader } from "../clients/ts/src/envelope-reader.js";
import {
  callEnded,
  createResponseFramer,
  type GrpcWireOptions,
  parseEnvelopes,
  type ResponseFramer,
  requestChunkReleaseKey,
  responseWritableKey,
} from "./grpc-handler-factory.js";

/** GrpcNodeHandlerOptions configure createGrpcNodeHandler. */
export interface GrpcNodeHandlerOptions {
  /** The services served, with their implementations. */
  readonly services: readonly ServiceImplSpec[];
  /** Run around every call, outermost first, as connect runs them. */
  readonly interceptors: Interceptor[];
  /** Largest request message accepted; a larger one fails the call with RESOURCE_EXHAUSTED. */
  readonly readMaxBytes: number;
  /** Largest response message written; a larger one fails the call with RESOURCE_EXHAUSTED. */
  readonly writeMaxBytes?: number;
  /** Longest grpc-timeout accepted; a longer one is left to connect, which refuses it. */
  readonly maxTimeoutMs?: number;
  /** How message bytes move to and from the wire (see createGrpcHandlerFactory). */
  readonly wire: GrpcWireOptions;
  /** The context values a call starts with. */
  readonly contextValues?: (req: Http2ServerRequest) => ContextValues;
}

/**
 * GrpcNodeHandler serves one request if it can: true when it took the request (and will answer
 * it), false when the caller must hand it to another handler untouched.
 */
export type GrpcNodeHandler = (req: Http2ServerRequest, res: Http2ServerResponse) => boolean;

const methodPost = "POST";
const protocolName = "grpc";

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
 * It declines everything else (HTTP/1.1, gRPC-Web, Connect, JSON, compressed messages, unknown
 * paths, malformed timeouts) so that connect answers those as before.
 *
 * A call's signal is aborted when the call ends: with `callEnded` once the response is
 * complete, with the error the call failed with, or with CANCELED (or the code matching the
 * RST_STREAM the client sent) when the stream closes first.
 */
export function createGrpcNodeHandler(opts: GrpcNodeHandlerOptions): GrpcNodeHandler {
  const writeMaxBytes = opts.writeMaxBytes ?? 0xffffffff;
  const maxTimeoutMs = opts.maxTimeoutMs ?? Number.MAX_SAFE_INTEGER;
  const methods = new Map<string, Method>();
  for (const service of opts.services) {
    for (const spec of Object.values(service.methods)) {
      const serialization = createMethodSerializationLookup(spec.method, undefined, undefined, {
        readMaxBytes: opts.readMaxBytes,
        writeMaxBytes,
      });
      methods.set(`/${service.service.typeName}/${spec.method.name}`, {
        spec,
        input: serialization.getI(true),
        output: serialization.getO(true),
      });
    }
  }
  return (req, res) => {
    if (req.method !== methodPost) return false;
    const method = methods.get(req.url);
    if (method === undefined) return false;
    const headers = req.headers;
    const type = parseContentType(headers["content-type"] ?? null);
    if (type === undefined || !type.binary) return false;
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return false;
    const timeout = parseTimeout(single(headers["grpc-timeout"]), maxTimeoutMs);
    if (timeout.error !== undefined) return false;
    serve(method, req, res, timeout.timeoutMs, opts, writeMaxBytes).catch(() => {
      // Unreachable by design (serve settles every call itself); should it happen, the client
      // sees its stream reset instead of waiting forever.
      req.stream.close(h2.NGHTTP2_INTERNAL_ERROR);
    });
    return true;
  };
}

interface Method {
  readonly spec: MethodImplSpec;
  readonly input: Serialization<MessageShape<DescMessage>>;
  readonly output: Serialization<MessageShape<DescMessage>>;
}

async function serve(
  method: Method,
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  timeoutMs: number | undefined,
  opts: GrpcNodeHandlerOptions,
  writeMaxBytes: number,
): Promise<void> {
  const { spec } = method;
  const { requestChunks, framer, recycle } = opts.wire;
  const values = opts.contextValues?.(req) ?? createContextValues();
  values.set(responseWritableKey, req.stream);
  if (requestChunks !== undefined) values.set(requestChunkReleaseKey, requestChunks.give);
  const context = createCallContext(spec, req, timeoutMs, values);
  let ended = false;
  // A stream that closes before the response is complete was cancelled or reset by the
  // client (or by the server's deadline): the handler's signal says so at once.
  req.stream.once("close", () => {
    if (!ended) context.abort(resetError(req.stream.rstCode));
  });
  const framing = createResponseFramer(method.output, framer, writeMaxBytes, recycle, req.stream);
  let failure: unknown;
  try {
    if (spec.kind === "unary") {
      const input = await readSingle(req, opts.readMaxBytes, method.input);
      const output = await invokeUnaryImplementation(spec, context, input, opts.interceptors);
      await writeMessage(res, context, framing.frame(output));
    } else {
      const messages = transformInvokeImplementation(
        spec,
        context,
        opts.interceptors,
      )(parseEnvelopes(req, opts.readMaxBytes, method.input, requestChunks));
      await writeMessages(res, context, messages, framing);
    }
  } catch (err) {
    failure = err;
  }
  ended = true;
  context.abort(failure ?? callEnded);
  finish(res, context, failure);
}

/** CallContext is a call's HandlerContext and the means to end its signal. */
interface CallContext extends HandlerContext {
  /** Aborts the call's signal with reason (once) and stops its deadline timer. */
  abort(reason: unknown): void;
}

/**
 * Builds a call's context as connect's createHandlerContext does (the same fields, headers
 * copied from the request, a signal aborted with DEADLINE_EXCEEDED at the client's deadline)
 * with one AbortController and a timer instead of three controllers linked by listeners:
 * connect's took ~35 µs per call here, most of a small call's context cost.
 */
function createCallContext(
  spec: MethodImplSpec,
  req: Http2ServerRequest,
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
    protocolName,
    url: `${req.scheme}://${req.authority}${req.url}`,
    signal: controller.signal,
    timeoutMs: () => (deadline === undefined ? undefined : deadline - Date.now()),
    requestHeader: new Headers(requestHeaderOf(req)),
    responseHeader: new Headers({ "content-type": contentTypeProto }),
    responseTrailer: new Headers({ "grpc-status": grpcStatusOk }),
    values,
    abort(reason) {
      clearTimeout(timer);
      if (!controller.signal.aborted) controller.abort(reason);
    },
  };
}

/**
 * Reads a unary call's one request message: none, or a second one, is a protocol error (as in
 * connect). Data after a second message is read and dropped; a stream that closes before the
 * request has ended fails the call as the reset it stands for.
 */
function readSingle(
  req: Http2ServerRequest,
  readMaxBytes: number,
  serialization: Serialization<MessageShape<DescMessage>>,
): Promise<MessageShape<DescMessage>> {
  const reader = createEnvelopeReader(readMaxBytes);
  return new Promise((resolve, reject) => {
    let first: Uint8Array | undefined;
    const settle = (err: unknown, message?: MessageShape<DescMessage>) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("close", onClose);
      if (err === undefined) resolve(message as MessageShape<DescMessage>);
      else reject(err);
    };
    const onData = (chunk: Buffer) => {
      try {
        for (const bytes of reader.push(chunk)) {
          if (first !== undefined) {
            req.resume();
            return settle(
              new ConnectError(
                "protocol error: received extra input message for unary method",
                Code.Unimplemented,
              ),
            );
          }
          first = bytes;
        }
      } catch (err) {
        req.resume();
        settle(err);
      }
    };
    const onEnd = () => {
      if (!reader.atBoundary) {
        return settle(
          new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument),
        );
      }
      if (first === undefined) {
        return settle(
          new ConnectError(
            "protocol error: missing input message for unary method",
            Code.Unimplemented,
          ),
        );
      }
      try {
        settle(undefined, serialization.parse(first));
      } catch (err) {
        settle(err);
      }
    };
    const onClose = () => settle(resetError(req.stream.rstCode));
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("close", onClose);
  });
}

/**
 * Writes the response headers before the first message (so implementations may still set
 * them) and each message after them, waiting for the stream to drain whenever it asks to. A
 * failed write is thrown into the messages, so interceptors watching them see the call fail
 * with it (as connect-node does), and then out of this function.
 */
async function writeMessages(
  res: Http2ServerResponse,
  context: HandlerContext,
  messages: AsyncIterable<MessageShape<DescMessage>>,
  framing: ResponseFramer,
): Promise<void> {
  const it = messages[Symbol.asyncIterator]();
  for (;;) {
    const step = await it.next();
    if (step.done === true) return;
    try {
      await writeMessage(res, context, framing.frame(step.value));
    } catch (err) {
      await it.throw?.(err).catch(() => undefined);
      throw err;
    }
  }
}

async function writeMessage(
  res: Http2ServerResponse,
  context: HandlerContext,
  parts: readonly Uint8Array[],
): Promise<void> {
  if (!res.headersSent) res.writeHead(200, nodeHeaders(context.responseHeader));
  for (const part of parts) {
    if (!res.write(part)) await drained(res);
  }
}

/** Ends the response with the call's status in its trailers, unless the stream is gone. */
function finish(res: Http2ServerResponse, context: HandlerContext, failure: unknown): void {
  if (res.stream.destroyed || res.writableEnded) return;
  if (failure !== undefined) {
    setTrailerStatus(
      context.responseTrailer,
      failure instanceof ConnectError
        ? failure
        : new ConnectError("internal error", Code.Internal, undefined, undefined, failure),
    );
  }
  if (!res.headersSent) res.writeHead(200, nodeHeaders(context.responseHeader));
  res.addTrailers(nodeHeaders(context.responseTrailer));
  res.end();
}

/** Resolves once the response drains; rejects when it closes or fails first. */
function drained(res: Http2ServerResponse): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: unknown) => {
      res.off("drain", onDrain);
      res.off("close", onClose);
      res.off("error", done);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onDrain = () => done();
    const onClose = () =>
      done(resetError(res.stream.rstCode) ?? new ConnectError("stream closed", Code.Canceled));
    res.once("drain", onDrain);
    res.once("close", onClose);
    res.once("error", done);
  });
}

function requestHeaderOf(req: Http2ServerRequest): [string, string][] {
  const out: [string, string][] = [];
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.startsWith(":")) continue;
    out.push([name, raw[i + 1] as string]);
  }
  return out;
}

function nodeHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

function single(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return typeof value === "string" ? value : (value[0] ?? null);
}

/** The error a stream reset by the peer stands for, as connect-node maps it. */
function resetError(rstCode: number): ConnectError {
  const text = `http/2 stream closed with error code ${rstCode}`;
  switch (rstCode) {
    case h2.NGHTTP2_REFUSED_STREAM:
      return new ConnectError(text, Code.Unavailable);
    case h2.NGHTTP2_ENHANCE_YOUR_CALM:
      return new ConnectError(text, Code.ResourceExhausted);
    case h2.NGHTTP2_INADEQUATE_SECURITY:
    case h2.NGHTTP2_HTTP_1_1_REQUIRED:
      return new ConnectError(text, Code.PermissionDenied);
    case h2.NGHTTP2_PROTOCOL_ERROR:
    case h2.NGHTTP2_INTERNAL_ERROR:
    case h2.NGHTTP2_FLOW_CONTROL_ERROR:
    case h2.NGHTTP2_SETTINGS_TIMEOUT:
    case h2.NGHTTP2_FRAME_SIZE_ERROR:
    case h2.NGHTTP2_COMPRESSION_ERROR:
    case h2.NGHTTP2_CONNECT_ERROR:
      return new ConnectError(text, Code.Internal);
    default:
      return new ConnectError(text, Code.Canceled);
  }
}
