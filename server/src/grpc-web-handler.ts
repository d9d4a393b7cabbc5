import type { IncomingMessage, ServerResponse } from "node:http";
import {
  Code,
  ConnectError,
  type ContextValues,
  createContextValues,
  type HandlerContext,
  type ServiceImplSpec,
} from "@connectrpc/connect";
import {
  encodeEnvelope,
  invokeUnaryImplementation,
  type UniversalHandlerOptions,
  validateUniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import {
  contentTypeProto,
  parseContentType,
  trailerFlag,
  trailerSerialize,
} from "@connectrpc/connect/protocol-grpc-web";
import { toNodeHeaders } from "@spillway/wire";
import {
  binaryMethods,
  callEnded,
  createCallContext,
  directCallOf,
  type Method,
  requestHeaderOf,
  setFailureStatus,
  writeMessages,
} from "./grpc-node-handler.js";
import { createResponseFramer, type GrpcWireOptions, parseEnvelopes } from "./grpc-wire.js";
import { invokeStreaming } from "./invoke-streaming.js";
import { readSingle } from "./read-single.js";
import { readableChunks } from "./readable-chunks.js";

/** GrpcWebCalls are what createGrpcWebHandler serves and how. */
export interface GrpcWebCalls {
  /** The services served, with their implementations. */
  readonly services: readonly ServiceImplSpec[];
  /** How response messages are framed (see grpc-wire.ts); requests are read plainly. */
  readonly wire: GrpcWireOptions;
  /** The context values a call starts with. */
  readonly contextValues?: (req: IncomingMessage) => ContextValues;
}

/**
 * GrpcWebHandler serves one HTTP/1.1 request if it can: true when it took the request (and will
 * answer it), false when the caller must hand it to another handler untouched.
 */
export type GrpcWebHandler = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * createGrpcWebHandler returns a handler for the binary gRPC-Web calls that arrive over
 * HTTP/1.1 (content type `application/grpc-web` or `application/grpc-web+proto`, no
 * `grpc-encoding` other than `identity`, a valid `grpc-timeout` or none) to a unary or
 * server-streaming method: browsers and command-line clients reading outputs. It answers them
 * as connect's gRPC-Web handler does (the same interceptors in the same order, the request gate
 * first, the same context, the status in a trailer frame at the end of the body), but writes
 * each response message as the wire's framer frames it: a bytes-mode data frame goes out as a
 * short prefix and the backend's own buffer, where connect's stock path serializes and copies
 * every payload byte twice (docs/design/grpc-fast-path.md).
 *
 * It declines everything else (HTTP/2, gRPC-Web text, JSON, Connect, compressed messages,
 * client-streaming methods, unknown paths, malformed or too long timeouts) so that connect
 * answers those as before. A call's signal is aborted when the call ends, or with CANCELED when
 * the client closes the connection first. How long the request may take to arrive and how
 * long a response may wait for a client that reads nothing are bounded by the caller, as for
 * connect's handlers (createRequestArrivalBound, watchResponseStall: a stalled response is
 * closed and its call fails with the error it is closed with).
 */
export function createGrpcWebHandler(
  options: Partial<UniversalHandlerOptions>,
  calls: GrpcWebCalls,
): GrpcWebHandler {
  const opts = validateUniversalHandlerOptions(options);
  const methods = binaryMethods(calls.services, opts);
  return (req, res) => {
    if (req.httpVersionMajor !== 1) return false;
    const call = directCallOf(methods, req, binaryGrpcWeb, opts.maxTimeoutMs);
    const kind = call?.method.spec.kind;
    if (call === undefined || (kind !== "unary" && kind !== "server_streaming")) return false;
    serve(call.method, req, res, call.timeoutMs, opts, calls).catch(() => {
      // Unreachable by design (serve settles every call itself); should it happen, the client
      // sees its connection close instead of waiting forever.
      res.destroy();
    });
    return true;
  };
}

/** The protocol name calls report in their HandlerContext, as connect's gRPC-Web handler does. */
const protocolName = "grpc-web";

/** Whether a content type is gRPC-Web's binary one (`application/grpc-web`, `+proto`). */
function binaryGrpcWeb(contentType: string | null): boolean {
  const type = parseContentType(contentType);
  return type?.binary === true && !type.text;
}

/**
 * What may wait between the request body and the call's parser before it is paused: a
 * gRPC-Web request is one small message (a window, a stat), so one default chunk is ample.
 */
const requestQueueBytes = 1024 * 1024;

async function serve(
  method: Method,
  req: IncomingMessage,
  res: ServerResponse,
  timeoutMs: number | undefined,
  opts: UniversalHandlerOptions,
  calls: GrpcWebCalls,
): Promise<void> {
  const { spec } = method;
  const values = calls.contextValues?.(req) ?? createContextValues();
  const scheme = "encrypted" in req.socket && req.socket.encrypted === true ? "https" : "http";
  const context = createCallContext(
    spec,
    {
      protocolName,
      url: `${scheme}://${req.headers.host ?? ""}${req.url}`,
      contentType: contentTypeProto,
    },
    requestHeaderOf(req.rawHeaders),
    timeoutMs,
    values,
  );
  let ended = false;
  // A response that closes before it ended lost its client (or was cut by the server's own
  // limits): the handler's signal says so at once.
  res.once("close", () => {
    if (!ended) {
      context.abort(new ConnectError("the client closed the connection", Code.Canceled));
    }
  });
  const framing = createResponseFramer(
    method.output,
    calls.wire.framer,
    opts.writeMaxBytes,
    calls.wire.recycle,
    res,
  );
  let failure: unknown;
  try {
    if (opts.requestGate !== undefined) await opts.requestGate(context);
    const input = parseEnvelopes(
      readableChunks(req, requestQueueBytes),
      opts.readMaxBytes,
      method.input,
      undefined,
    );
    if (spec.kind === "unary") {
      const output = await invokeUnaryImplementation(
        spec,
        context,
        await readSingle(input, "unary"),
        opts.interceptors,
      );
      await write(res, context, framing.frame(output));
    } else {
      const messages = invokeStreaming(spec, context, input, opts.interceptors);
      await writeMessages(messages, framing, (parts) => write(res, context, parts));
    }
  } catch (err) {
    failure = err;
  }
  ended = true;
  context.abort(failure ?? callEnded);
  releaseRequest(req, res);
  finish(res, context, failure);
}

/**
 * Lets go of a request whose call ended before its reader took all of it, so that the
 * connection does not stall: Node reads a connection's next request only once this one has been
 * read to its end. A request whose body has all arrived (a reader that stopped at a parse error,
 * or at a unary call's one message, leaves its end paused in the stream) is read out. One cut
 * off mid-body (refused at its gate or for a message over the size limit, while the client may
 * still be sending it) closes its connection after the answer instead of reading what may be
 * megabytes the call will never use.
 */
function releaseRequest(req: IncomingMessage, res: ServerResponse): void {
  if (req.readableEnded || req.destroyed) return;
  if (req.complete) {
    req.removeAllListeners("data");
    req.resume();
    return;
  }
  if (!res.headersSent) res.shouldKeepAlive = false;
  else res.once("finish", () => req.socket.end());
}

/**
 * Writes the response headers before the first message (so implementations may still set
 * them) and the message's parts after them, waiting for the socket to drain whenever it asks
 * to.
 */
async function write(
  res: ServerResponse,
  context: HandlerContext,
  parts: readonly Uint8Array[],
): Promise<void> {
  if (!res.headersSent) res.writeHead(200, toNodeHeaders(context.responseHeader));
  for (const part of parts) {
    if (!res.write(part)) await drained(res);
  }
}

/** Ends the body with the trailer frame holding the call's status, unless the response is gone. */
function finish(res: ServerResponse, context: HandlerContext, failure: unknown): void {
  if (res.destroyed || res.writableEnded) return;
  setFailureStatus(context.responseTrailer, failure);
  if (!res.headersSent) res.writeHead(200, toNodeHeaders(context.responseHeader));
  res.end(encodeEnvelope(trailerFlag, trailerSerialize(context.responseTrailer)));
}

/**
 * Resolves once the response drains; rejects when it fails first (with the error it failed
 * with: watchResponseStall's DEADLINE_EXCEEDED for a client that read nothing) or closes.
 */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: unknown) => {
      res.off("drain", onDrain);
      res.off("close", onClose);
      res.off("error", done);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onDrain = () => done();
    const onClose = () => done(new ConnectError("the client closed the connection", Code.Canceled));
    res.once("drain", onDrain);
    res.once("close", onClose);
    res.once("error", done);
  });
}
