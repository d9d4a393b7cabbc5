import * as http2 from "node:http2";
import type {
  DescMessage,
  DescMethodStreaming,
  DescMethodUnary,
  MessageShape,
} from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { getAbortSignalReason } from "@connectrpc/connect/protocol";
import {
  headerEncoding,
  headerGrpcStatus,
  requestHeader,
  validateResponse,
  validateTrailer,
} from "@connectrpc/connect/protocol-grpc";
import {
  createEnvelopeReader,
  fromHttp2Error,
  fromResetCode,
  toHeaders,
  toNodeHeaders,
} from "@spillway/wire";
import { createExchangeTransport, type Exchange } from "./exchange-transport.js";
import { wireRequest } from "./request-wire.js";
import { createResponseQueue, type SplitBytesField } from "./response-queue.js";
import type { Sessions } from "./session-pool.js";

/** GrpcTransportOptions configure createGrpcTransport. */
export interface GrpcTransportOptions {
  /** Server URL, e.g. `http://127.0.0.1:50051`; a path is kept as a prefix of every method. */
  readonly baseUrl: string;
  /**
   * The HTTP/2 connections calls run on: connect-node's Http2SessionManager (one connection,
   * with its keepalive and reconnects) or a pool of them (createSessionPool).
   */
  readonly sessionManager: Sessions;
  /** Interceptors, outermost first. */
  readonly interceptors?: readonly Interceptor[];
  /** Largest response message accepted; a larger one fails the call RESOURCE_EXHAUSTED. */
  readonly readMaxBytes: number;
  /**
   * Response messages that may be handed out in pieces: a message of type `output` that is
   * exactly the bytes field at `path` (field numbers, outermost first) and arrives over several
   * HTTP/2 DATA frames becomes one `message(piece)` per frame, its data not copied. Only for
   * fields whose protocol says a message's data may be split (bytes-mode data frames).
   */
  readonly bytesFields?: readonly SplitBytesField[];
}

/**
 * How long a server that answered before the whole request was sent may take to let the
 * stream close (by reading what was already on its way) before the client resets it.
 */
const unwantedRequestMs = 10_000;

/**
 * Stops sending a request the server has already answered: no further message is written,
 * what is already on its way is sent, and the stream is ended rather than reset. A server
 * counts every reset its clients send against a limit (nghttp2, in Node servers among others,
 * shuts a connection past 1,000 resets at once, 33 a second after), so a client refused many
 * times in a row, in an outage or over a limit, would lose its connection; Spillway's server
 * reads and discards the rest. A server that does not let the stream close within
 * unwantedRequestMs is reset after all.
 */
function stopRequest(stream: http2.ClientHttp2Stream): void {
  stream.end();
  const timer = setTimeout(() => {
    if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
  }, unwantedRequestMs);
  timer.unref();
  stream.once("close", () => clearTimeout(timer));
}

/** Resolves once the stream can take more writes, or has closed. */
function drained(stream: http2.ClientHttp2Stream): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off("drain", done);
      stream.off("close", done);
      resolve();
    };
    stream.on("drain", done);
    stream.on("close", done);
  });
}

/** Resolves once `bytes` are written out (or the stream has closed). */
function written(stream: http2.ClientHttp2Stream, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off("close", done);
      resolve();
    };
    stream.on("close", done);
    stream.write(bytes, done);
  });
}

/**
 * Writes every request message to the stream, then ends it. A message's bytes are written
 * out before the next message is asked for, so a caller may reuse a chunk's memory once its
 * stream is asked for more (the caller's chunk is sent itself, not a copy). A request of one
 * message (`single`: unary and server-streaming calls) ends with its last bytes, in the same
 * DATA frame. Stops quietly once the stream is closed or ended (the response then carries the
 * verdict) or `signal` aborts (the call's reset follows), never ending the request then; an
 * error from the request messages themselves goes to `fail`.
 */
async function sendRequest<I extends DescMessage>(
  stream: http2.ClientHttp2Stream,
  schema: I,
  input: AsyncIterable<MessageShape<I>>,
  single: boolean,
  fail: (err: ConnectError) => void,
  signal: AbortSignal,
): Promise<void> {
  // An aborted call's request must never end cleanly: a server takes a request's end for the
  // end of the upload, and the call's reset may come a turn later (a streamed offload cut off
  // while its source waited committed what it had sent, while the caller saw CANCELED).
  const stopped = () => signal.aborted || stream.closed || stream.destroyed || stream.writableEnded;
  try {
    for await (const message of input) {
      const parts = wireRequest(schema, message);
      for (const [i, bytes] of parts.entries()) {
        if (stopped()) return;
        // A server reads a unary or server-streaming request to its end before it answers;
        // an end sent once the last write is out went a turn later, in a packet of its own.
        if (i === parts.length - 1 && single) stream.end(bytes);
        else if (i === parts.length - 1) await written(stream, bytes);
        else if (!stream.write(bytes)) await drained(stream);
      }
    }
    if (!stopped()) stream.end();
  } catch (err) {
    fail(ConnectError.from(err));
  }
}

/**
 * Sends one call's request on a new HTTP/2 stream and resolves with the response header.
 * Messages are parsed as they arrive and held up to pauseAtMessages or pauseAtBytes before the
 * stream is paused, so a slow consumer holds back the server through HTTP/2 flow control. The
 * first verdict wins: an aborted signal, a reset or broken stream, a malformed body, or the
 * status in the trailer; queued messages are still handed out before an error from the trailer.
 */
async function exchange<I extends DescMessage, O extends DescMessage>(
  opts: GrpcTransportOptions,
  targetOf: (url: string) => Target,
  method: DescMethodUnary<I, O> | DescMethodStreaming<I, O>,
  url: string,
  header: Headers,
  signal: AbortSignal,
  input: AsyncIterable<MessageShape<I>>,
): Promise<Exchange<O>> {
  const sm = opts.sessionManager;
  const target = targetOf(url);
  if (target.origin !== sm.authority) {
    throw new ConnectError(
      `cannot make a request to ${target.origin}: the http2 session is connected to ${sm.authority}`,
      Code.Internal,
    );
  }
  if (signal.aborted) throw ConnectError.from(getAbortSignalReason(signal), Code.Canceled);
  let stream: http2.ClientHttp2Stream;
  // Resets the stream (RST_STREAM CANCEL). Node's stream.close(CANCEL) ends the writable side
  // first, so an open request went out with END_STREAM before the reset: a whole upload to the
  // server, which committed what a cancelled offload had sent. Aborting the request's own
  // signal destroys the stream, which sends the reset alone.
  const resetter = new AbortController();
  // connect's type leaves `signal` out, but the manager hands the options to Node as they are.
  const options: http2.ClientSessionRequestOptions = { signal: resetter.signal };
  try {
    stream = await sm.request(
      "POST",
      target.path,
      toNodeHeaders(header),
      options as Parameters<typeof sm.request>[3],
    );
  } catch (err) {
    throw fromHttp2Error(err);
  }
  // Read at the stream's close, when the stream no longer names it.
  const session = stream.session;

  const split = opts.bytesFields?.find((field) => field.output.typeName === method.output.typeName);
  const reader = createEnvelopeReader(
    opts.readMaxBytes,
    split === undefined ? {} : { bytesField: split.path },
  );
  const queue = createResponseQueue(method.output, split, () => {
    if (stream.isPaused()) stream.resume();
  });
  const trailer = new Headers();
  let responseHeader: Headers | undefined;
  let foundStatus = false;
  let ended = false;
  let failure: ConnectError | undefined;
  let settleHeader: { resolve(ex: Exchange<O>): void; reject(err: ConnectError): void };
  const headerPromise = new Promise<Exchange<O>>((resolve, reject) => {
    settleHeader = { resolve, reject };
  });

  /** Ends the call with err, resetting the stream unless the server already ended it well. */
  const fail = (err: ConnectError, reset = true): void => {
    if (failure !== undefined || ended) return;
    failure = err;
    if (reset && !stream.closed) resetter.abort();
    settleHeader.reject(err);
    queue.close(err);
  };
  const onAbort = () => {
    queue.clear();
    fail(ConnectError.from(getAbortSignalReason(signal), Code.Canceled));
  };
  signal.addEventListener("abort", onAbort, { once: true });
  // An abort while the stream was being opened fired before the listener existed.
  if (signal.aborted) onAbort();

  /** Ends the response once its body and trailer are in: the trailer's status decides. */
  const finish = (): void => {
    if (failure !== undefined || ended || responseHeader === undefined) return;
    if (!reader.atBoundary) {
      fail(new ConnectError("protocol error: incomplete envelope", Code.Internal));
      return;
    }
    // A status in real trailers wins over one in the header, as in connect's gRPC transport.
    if (!foundStatus || trailer.has(headerGrpcStatus)) {
      try {
        validateTrailer(trailer, responseHeader);
      } catch (err) {
        // The status the server ended the stream with: nothing to reset (see stopRequest).
        fail(ConnectError.from(err), false);
        return;
      }
    }
    ended = true;
    queue.close();
  };

  stream.on("response", (node) => {
    try {
      const h = toHeaders(node);
      const checked = validateResponse(Number(node[":status"] ?? 0), h);
      const encoding = h.get(headerEncoding);
      if (encoding !== null && encoding.toLowerCase() !== "identity") {
        throw new ConnectError(`unsupported response encoding "${encoding}"`, Code.Internal, h);
      }
      responseHeader = h;
      foundStatus = checked.foundStatus;
      settleHeader.resolve({
        header: h,
        trailer,
        headerError: checked.headerError,
        messages: queue.messages,
      });
    } catch (err) {
      fail(ConnectError.from(err));
    }
  });
  stream.on("data", (chunk: Buffer) => {
    sm.notifyResponseByteRead(stream);
    if (failure !== undefined) return;
    let room = true;
    try {
      for (const item of reader.push(chunk)) room = queue.push(item) && room;
    } catch (err) {
      // The reader's and the queue's errors are ConnectErrors already.
      fail(ConnectError.from(err));
      return;
    }
    if (!room) stream.pause();
  });
  stream.on("trailers", (node) => {
    toHeaders(node).forEach((value, name) => {
      trailer.append(name, value);
    });
  });
  let bodyEnded = false;
  let streamError: unknown;
  stream.on("end", () => {
    bodyEnded = true;
    if (!stream.writableEnded && !stream.closed) {
      stopRequest(stream);
      // The status is in: the verdict need not wait for the rest of the request to go out.
      if (foundStatus || trailer.has(headerGrpcStatus)) finish();
    }
  });
  stream.on("error", (err) => {
    streamError ??= err;
  });
  // The verdict waits for the close: a reset can follow the last bytes of a body, and a
  // status that arrived wins over the reset or error that came with the stream's end.
  stream.on("close", () => {
    signal.removeEventListener("abort", onAbort);
    if (foundStatus || trailer.has(headerGrpcStatus)) {
      finish();
      return;
    }
    // Node reports a peer's reset as an error of its own; any other error (a failed TLS
    // handshake, a broken connection) says more than the reset that came with it. A stream
    // whose session is gone was closed by Node as the connection went, not reset by the peer.
    const reset = fromResetCode(stream.rstCode ?? 0, session?.destroyed ? "lost" : "open");
    const ownError =
      streamError !== undefined &&
      (streamError as { code?: unknown }).code !== "ERR_HTTP2_STREAM_ERROR";
    if (ownError) fail(fromHttp2Error(streamError));
    else if (reset !== undefined) fail(reset);
    else if (streamError !== undefined) fail(fromHttp2Error(streamError));
    else if (bodyEnded) finish();
    else {
      fail(
        new ConnectError(
          "protocol error: the stream closed before the response ended",
          Code.Internal,
        ),
      );
    }
  });
  const single = method.methodKind === "unary" || method.methodKind === "server_streaming";
  void sendRequest(stream, method.input, input, single, fail, signal);
  return headerPromise;
}

export function createGrpcTransport(opts: GrpcTransportOptions): Transport {
  const targetOf = createTargetCache();
  return createExchangeTransport({
    baseUrl: opts.baseUrl,
    interceptors: opts.interceptors,
    requestHeader: (timeoutMs, header) => requestHeader(true, timeoutMs, header),
    exchange: (method, url, header, signal, input) =>
      exchange(opts, targetOf, method, url, header, signal, input),
  });
}

/** Where a call's URL points: the origin its session must serve, and the request's path. */
interface Target {
  readonly origin: string;
  readonly path: string;
}

/** URLs a transport keeps parsed: a client's methods, with room for what interceptors make. */
const maxTargets = 64;

/**
 * Returns a URL's Target, parsing each URL once (a call's URL is its method's, so a client sees
 * a handful): `new URL` on every call was ~2 % of a small call's client CPU.
 */
function createTargetCache(): (url: string) => Target {
  const targets = new Map<string, Target>();
  return (url) => {
    const known = targets.get(url);
    if (known !== undefined) return known;
    const parsed = new URL(url);
    const target = { origin: parsed.origin, path: parsed.pathname + parsed.search };
    if (targets.size < maxTargets) targets.set(url, target);
    return target;
  };
}
