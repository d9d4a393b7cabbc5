import * as http from "node:http";
import * as https from "node:https";
import type {
  DescMessage,
  DescMethodStreaming,
  DescMethodUnary,
  MessageShape,
} from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { getAbortSignalReason } from "@connectrpc/connect/protocol";
import {
  headerGrpcStatus,
  parseContentType,
  requestHeader,
  trailerFlag,
  trailerParse,
  validateResponse,
  validateTrailer,
} from "@connectrpc/connect/protocol-grpc-web";
import { createEnvelopeReader, fromHttp2Error, toHeaders, toNodeHeaders } from "@spillway/wire";
import { createExchangeTransport, type Exchange } from "./exchange-transport.js";
import { wireRequest } from "./request-wire.js";
import { createResponseQueue, type SplitBytesField } from "./response-queue.js";
import type { ClientTlsOptions } from "./session-manager.js";

/** GrpcWebTransportOptions configure createGrpcWebTransport. */
export interface GrpcWebTransportOptions {
  /** Server URL, e.g. `http://127.0.0.1:50051`; a path is kept as a prefix of every method. */
  readonly baseUrl: string;
  /** Where connections come from (createKeepAliveAgent's: kept open between calls). */
  readonly agent: http.Agent;
  /** Interceptors, outermost first. */
  readonly interceptors?: readonly Interceptor[];
  /** Largest response message accepted; a larger one fails the call RESOURCE_EXHAUSTED. */
  readonly readMaxBytes: number;
  /** Response messages that may be handed out in pieces (see GrpcTransportOptions). */
  readonly bytesFields?: readonly SplitBytesField[];
}

/**
 * createKeepAliveAgent returns the agent a gRPC-Web transport to `baseUrl` takes its HTTP/1.1
 * connections from: kept open between calls (an idle one does not hold the process open), and
 * for an https URL with the client's CA and mTLS identity.
 */
export function createKeepAliveAgent(baseUrl: string, tls: ClientTlsOptions = {}): http.Agent {
  return new URL(baseUrl).protocol === "https:"
    ? new https.Agent({ keepAlive: true, ...tls })
    : new http.Agent({ keepAlive: true });
}

/** The errors that say the server does not answer gRPC-Web over HTTP/1.1 (see isHttp1Refusal). */
const refusals = new WeakSet<ConnectError>();

/** Marks err as a refusal of HTTP/1.1 gRPC-Web and returns it. */
function refusal(err: ConnectError): ConnectError {
  refusals.add(err);
  return err;
}

/**
 * isHttp1Refusal tells whether a call through createGrpcWebTransport failed because the server
 * (or a proxy before it) does not answer gRPC-Web over HTTP/1.1 at all: an answer that is not
 * gRPC-Web (an HTTP error without a gRPC status, another content type) or not HTTP/1.1 (an
 * HTTP/2-only server). The same call over HTTP/2 may well succeed; any other failure is the
 * call's own.
 */
export function isHttp1Refusal(err: unknown): boolean {
  return err instanceof ConnectError && refusals.has(err);
}

/** Node's errors for bytes that are not an HTTP/1.1 response at all. */
const parseErrorCode = /^HPE_/;

/**
 * The one request message of a unary or server-streaming call: gRPC-Web over HTTP/1.1 sends
 * the whole request before the response begins.
 */
async function onlyMessage<I extends DescMessage>(
  method: DescMethodUnary | DescMethodStreaming,
  input: AsyncIterable<MessageShape<I>>,
): Promise<MessageShape<I>> {
  if (method.methodKind !== "unary" && method.methodKind !== "server_streaming") {
    throw new ConnectError(
      `${method.name} is ${method.methodKind.replace("_", "-")}: gRPC-Web over HTTP/1.1 carries unary and server-streaming calls only`,
      Code.Unimplemented,
    );
  }
  let message: MessageShape<I> | undefined;
  for await (const m of input) {
    if (message !== undefined) {
      throw new ConnectError(`${method.name} takes one request message`, Code.InvalidArgument);
    }
    message = m;
  }
  if (message === undefined) {
    throw new ConnectError(`${method.name} takes one request message`, Code.InvalidArgument);
  }
  return message;
}

/**
 * Sends one call as an HTTP/1.1 request on a connection from the agent and resolves with the
 * response header. Messages are parsed as they arrive and held up to the response queue's
 * bounds before the response is paused (TCP then holds the server back). The first verdict
 * wins: an aborted signal, a broken connection, a malformed body, or the status in the header
 * or the trailer frame; queued messages are still handed out before an error from the trailer.
 */
async function exchange<I extends DescMessage, O extends DescMessage>(
  opts: GrpcWebTransportOptions,
  method: DescMethodUnary<I, O> | DescMethodStreaming<I, O>,
  url: string,
  header: Headers,
  signal: AbortSignal,
  input: AsyncIterable<MessageShape<I>>,
): Promise<Exchange<O>> {
  const message = await onlyMessage(method, input);
  if (signal.aborted) throw ConnectError.from(getAbortSignalReason(signal), Code.Canceled);
  const parts = wireRequest(method.input, message);
  const body = parts.length === 1 ? (parts[0] as Uint8Array) : Buffer.concat(parts);
  const target = new URL(url);
  const request = target.protocol === "https:" ? https.request : http.request;
  const req = request(target, {
    method: "POST",
    agent: opts.agent,
    headers: { ...toNodeHeaders(header), "content-length": String(body.byteLength) },
  });

  const split = opts.bytesFields?.find((field) => field.output.typeName === method.output.typeName);
  const reader = createEnvelopeReader(opts.readMaxBytes, {
    trailerFlag,
    ...(split === undefined ? {} : { bytesField: split.path }),
  });
  let res: http.IncomingMessage | undefined;
  const queue = createResponseQueue(method.output, split, () => {
    if (res?.isPaused() === true) res.resume();
  });
  const trailer = new Headers();
  let responseHeader: Headers | undefined;
  let foundStatus = false;
  let headerError: ConnectError | undefined;
  let trailerSeen = false;
  let ended = false;
  let failure: ConnectError | undefined;
  let settleHeader: { resolve(ex: Exchange<O>): void; reject(err: ConnectError): void };
  const headerPromise = new Promise<Exchange<O>>((resolve, reject) => {
    settleHeader = { resolve, reject };
  });

  /** Ends the call with err; the connection is closed, not returned to the agent. */
  const fail = (err: ConnectError): void => {
    if (failure !== undefined || ended) return;
    failure = err;
    signal.removeEventListener("abort", onAbort);
    req.destroy();
    settleHeader.reject(err);
    queue.close(err);
  };
  const onAbort = () => {
    queue.clear();
    fail(ConnectError.from(getAbortSignalReason(signal), Code.Canceled));
  };
  signal.addEventListener("abort", onAbort, { once: true });

  /** Ends the response once its body is in: the trailer frame's status decides. */
  const finish = (): void => {
    if (failure !== undefined || ended || responseHeader === undefined) return;
    if (!reader.atBoundary) {
      fail(new ConnectError("protocol error: incomplete envelope", Code.Internal));
      return;
    }
    // A body without a trailer frame is a trailers-only response when the header has a status:
    // the header is then the trailer. A trailer frame in the body wins over the header.
    if (!trailerSeen && foundStatus) {
      if (headerError !== undefined) {
        fail(headerError);
        return;
      }
      responseHeader.forEach((value, name) => {
        trailer.append(name, value);
      });
    }
    try {
      validateTrailer(trailer, responseHeader);
    } catch (err) {
      fail(ConnectError.from(err));
      return;
    }
    ended = true;
    signal.removeEventListener("abort", onAbort);
    queue.close();
  };

  /** Takes the next piece of the body: messages to the queue, the trailer frame to `trailer`. */
  const read = (chunk: Buffer): void => {
    if (failure !== undefined) return;
    let room = true;
    try {
      for (const item of reader.push(chunk)) {
        if (trailerSeen) {
          throw new ConnectError("protocol error: data after the trailer frame", Code.Internal);
        }
        if ("trailer" in item) {
          trailerSeen = true;
          trailerParse(item.trailer).forEach((value, name) => {
            trailer.append(name, value);
          });
        } else {
          room = queue.push(item) && room;
        }
      }
    } catch (err) {
      // The reader's and the queue's errors are ConnectErrors already.
      fail(ConnectError.from(err));
      return;
    }
    if (!room) res?.pause();
  };

  req.on("response", (incoming) => {
    res = incoming;
    const status = incoming.statusCode ?? 0;
    const h = toHeaders(incoming.headers);
    const type = parseContentType(incoming.headers["content-type"] ?? null);
    try {
      // An HTTP error is connect's error for its status; a 2xx answer must be binary gRPC-Web,
      // or carry its gRPC status in the header (a trailers-only response).
      ({ foundStatus, headerError } = validateResponse(status, h));
      if (type === undefined ? !foundStatus : !type.binary || type.text) {
        throw new ConnectError(
          `HTTP ${status} with content type ${incoming.headers["content-type"] ?? "(none)"}, not binary gRPC-Web`,
          type === undefined ? Code.Unknown : Code.Internal,
          h,
        );
      }
      responseHeader = h;
      // A status in the header is judged once the body has shown whether it has a trailer.
      settleHeader.resolve({
        header: h,
        trailer,
        headerError: undefined,
        messages: queue.messages,
      });
    } catch (err) {
      const connectErr = ConnectError.from(err);
      fail(h.has(headerGrpcStatus) ? connectErr : refusal(connectErr));
      return;
    }
    incoming.on("data", read);
    incoming.on("end", finish);
    incoming.on("close", () => {
      if (!incoming.complete) {
        fail(new ConnectError("the connection closed before the response ended", Code.Unavailable));
      }
    });
    incoming.on("error", (err) => fail(fromHttp2Error(err)));
  });
  req.on("error", (err) => {
    const code = (err as { code?: unknown }).code;
    if (typeof code === "string" && parseErrorCode.test(code)) {
      fail(
        refusal(
          new ConnectError(`the server did not answer HTTP/1.1: ${err.message}`, Code.Unavailable),
        ),
      );
    } else if (res === undefined && req.reusedSocket && code === "ECONNRESET") {
      // A kept-alive connection the server closed as the request went out: nothing was served.
      fail(
        new ConnectError("the server closed an idle connection as it was reused", Code.Unavailable),
      );
    } else {
      fail(fromHttp2Error(err));
    }
  });
  req.end(body);
  return headerPromise;
}

/**
 * createGrpcWebTransport returns a connect Transport that speaks binary gRPC-Web over HTTP/1.1
 * connections from a keep-alive agent, with the same interceptors, deadlines (grpc-timeout),
 * cancellation and status handling as createGrpcTransport, for unary and server-streaming calls
 * (a client- or bidi-streaming call fails UNIMPLEMENTED).
 *
 * Why: Node reads a large response over HTTP/1.1 with a fraction of the CPU HTTP/2 takes (no
 * per-frame callbacks, no flow-control windows), so bulk reads run nearer the disk's speed
 * (docs/design/http1-bulk-reads.md). Response messages are parsed as they arrive, a
 * `bytesFields` message handed out in pieces, uncopied; the response is paused while 4 MiB or
 * 256 parsed messages wait. A failure that says the server does not answer gRPC-Web over
 * HTTP/1.1 is recognised by isHttp1Refusal.
 */
export function createGrpcWebTransport(opts: GrpcWebTransportOptions): Transport {
  return createExchangeTransport({
    baseUrl: opts.baseUrl,
    interceptors: opts.interceptors,
    requestHeader: (timeoutMs, header) => requestHeader(true, timeoutMs, header, true),
    exchange: (method, url, header, signal, input) =>
      exchange(opts, method, url, header, signal, input),
  });
}
