import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextKey,
  createHandlerContext,
  type MethodImplSpec,
} from "@connectrpc/connect";
import {
  type AsyncIterableTransform,
  assertByteStreamRequest,
  compressionNegotiate,
  contentTypeMatcher,
  createMethodSerializationLookup,
  createMethodUrl,
  encodeEnvelope,
  type ProtocolHandlerFactory,
  pipe,
  type Serialization,
  transformCatchFinally,
  transformCompressEnvelope,
  transformDecompressEnvelope,
  transformInvokeImplementation,
  transformJoinEnvelopes,
  transformParseEnvelope,
  transformPrepend,
  transformSerializeEnvelope,
  transformSplitEnvelope,
  type UniversalHandler,
  type UniversalHandlerOptions,
  type UniversalServerRequest,
  type UniversalServerResponse,
  untilFirst,
  uResponseMethodNotAllowed,
  uResponseOk,
  uResponseUnsupportedMediaType,
  validateUniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import {
  contentTypeJson,
  contentTypeProto,
  contentTypeRegExp,
  grpcStatusOk,
  headerAcceptEncoding,
  headerContentType,
  headerEncoding,
  headerGrpcStatus,
  headerTimeout,
  parseContentType,
  parseTimeout,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
import { createEnvelopeReader, envelopeHeaderBytes } from "@spillway/wire";
import type { ChunkPool } from "./backends/chunk-pool.js";
import { idleRequest } from "./idle-request.js";

/**
 * WireFramer returns a response message as the gRPC body bytes it stands for (envelope
 * included), in parts written one after another, or undefined to let the message be serialized
 * the usual way. Parts are written as they are, so a part may be the very buffer the message
 * holds: a 1 MiB data frame then costs a 13-byte prefix instead of four 1 MiB copies.
 */
export type WireFramer = (message: MessageShape<DescMessage>) => readonly Uint8Array[] | undefined;

/**
 * WireRecycler takes framed parts back once they are written: the framer's parts are handed
 * over to the wire (the message that held them is not used again), so parts whose memory came
 * from a pool may return to it.
 */
export type WireRecycler = (part: Uint8Array) => void;

/** GrpcWireOptions are how the handler moves message bytes to and from the wire. */
export interface GrpcWireOptions {
  /** Frames response messages it recognises without serializing them. */
  readonly framer: WireFramer;
  /** Takes framed parts back once written (see WireRecycler). */
  readonly recycle?: WireRecycler;
  /**
   * Where request messages spread over several DATA chunks are assembled. The handler may
   * hand a message's bytes back through the call's requestChunkReleaseKey once it is done
   * with them; messages it never hands back are collected as usual.
   */
  readonly requestChunks?: ChunkPool;
}

/**
 * requestChunkReleaseKey carries, for a call whose request messages are assembled from
 * requestChunks, the function that hands a message's bytes (or a view of them) back for
 * reuse. The caller promises nothing reads that memory afterwards. Unset on other calls.
 */
export const requestChunkReleaseKey = createContextKey<((bytes: Uint8Array) => void) | undefined>(
  undefined,
  { description: "hands a request message's bytes back for reuse" },
);

/** What a call's response is written to; `writableLength` is 0 once every write completed. */
export interface ResponseWritable {
  readonly writableLength: number;
}

/**
 * responseWritableKey carries the HTTP/2 stream a call's response is written to, so written
 * parts can be recycled; without it nothing is.
 */
export const responseWritableKey = createContextKey<ResponseWritable | undefined>(undefined, {
  description: "the stream the call's response is written to",
});

/** protocolName is the protocol name gRPC calls report in their HandlerContext. */
export const protocolName = "grpc";
/**
 * callEnded is the reason a call's signal carries once its response has ended normally.
 * Connect aborts it without one, and Node then builds a DOMException, stack trace included,
 * for every call.
 */
export const callEnded = new ConnectError("the call has ended", Code.Canceled);
/** methodPost is the only HTTP method a gRPC call arrives with. */
export const methodPost = "POST";

/**
 * createGrpcHandlerFactory returns a gRPC protocol handler factory that behaves as connect's own
 * (`createHandlerFactory` of `@connectrpc/connect/protocol-grpc`: the same content types,
 * timeouts, compression negotiation, interceptors and trailer statuses) with two differences.
 * An uncompressed binary response message that `framer` recognises is written as the parts it
 * returns instead of being serialized: protobuf-es writes a bytes field into a growing buffer,
 * shifts it once per enclosing message and slices it, and connect copies it once more into the
 * envelope; for bulk reads those copies were most of the server's CPU and of its transient
 * memory. Every other message, and every response of the gRPC-Web and Connect protocols, is
 * encoded by connect. And a call that ends normally aborts its signal with `callEnded` as the
 * reason, not with none.
 *
 * With `recycle`, each framed part is handed to it once the call's response stream (the
 * context's responseWritableKey) reports every write completed, never earlier. With
 * `requestChunks`, large request messages are assembled in its chunks, and the call's
 * handler may give them back (requestChunkReleaseKey). With `idleStreamMs`, a unary call whose
 * request is not complete that long after it arrived ends with DEADLINE_EXCEEDED (the
 * request-reading bound grpc-node-handler.ts applies on the direct path).
 */
export function createGrpcHandlerFactory(
  options: Partial<UniversalHandlerOptions>,
  wire: GrpcWireOptions,
  idleStreamMs?: number,
): ProtocolHandlerFactory {
  const opt = validateUniversalHandlerOptions(options);
  const factory = (spec: MethodImplSpec): UniversalHandler =>
    Object.assign(createHandler(opt, spec, wire, idleStreamMs), {
      protocolNames: [protocolName],
      allowedMethods: [methodPost],
      supportedContentType: contentTypeMatcher(contentTypeRegExp),
      requestPath: createMethodUrl("/", spec.method),
      service: spec.method.parent,
      method: spec.method,
    });
  return Object.assign(factory, { protocolName });
}

function createHandler(
  opt: UniversalHandlerOptions,
  spec: MethodImplSpec,
  wire: GrpcWireOptions,
  idleStreamMs: number | undefined,
): (req: UniversalServerRequest) => Promise<UniversalServerResponse> {
  const { framer, recycle, requestChunks } = wire;
  const serialization = createMethodSerializationLookup(
    spec.method,
    opt.binaryOptions,
    opt.jsonOptions,
    opt,
  );
  return async function handle(req) {
    assertByteStreamRequest(req);
    const type = parseContentType(req.header.get(headerContentType));
    if (type === undefined) return uResponseUnsupportedMediaType;
    if (req.method !== methodPost) return uResponseMethodNotAllowed;
    const timeout = parseTimeout(req.header.get(headerTimeout), opt.maxTimeoutMs);
    const context = createHandlerContext({
      ...spec,
      service: spec.method.parent,
      requestMethod: req.method,
      protocolName,
      timeoutMs: timeout.timeoutMs,
      shutdownSignal: opt.shutdownSignal,
      requestSignal: req.signal,
      requestHeader: req.header,
      url: req.url,
      responseHeader: { [headerContentType]: type.binary ? contentTypeProto : contentTypeJson },
      responseTrailer: { [headerGrpcStatus]: grpcStatusOk },
      contextValues: req.contextValues,
    });
    const compression = compressionNegotiate(
      opt.acceptCompression,
      req.header.get(headerEncoding),
      req.header.get(headerAcceptEncoding),
      headerAcceptEncoding,
    );
    if (compression.response) {
      context.responseHeader.set(headerEncoding, compression.response.name);
    }
    // As in connect: the request and the response are separate pipelines, so a failure to
    // write the response does not surface as a failure to read the request.
    const plain =
      compression.request === null && type.binary && !compression.error && !timeout.error;
    if (plain && requestChunks !== undefined) {
      req.contextValues?.set(requestChunkReleaseKey, requestChunks.give);
    }
    const parsed = plain
      ? parseEnvelopes(req.body, opt.readMaxBytes, serialization.getI(true), requestChunks)
      : pipe(
          req.body,
          transformPrepend<Uint8Array>(() => {
            // Raised here so they reach the client as the trailer status, as connect does.
            if (compression.error) throw compression.error;
            if (timeout.error) throw timeout.error;
            return undefined;
          }),
          transformSplitEnvelope(opt.readMaxBytes),
          transformDecompressEnvelope(compression.request, opt.readMaxBytes),
          transformParseEnvelope(serialization.getI(type.binary)),
        );
    const input =
      spec.kind === "unary" && idleStreamMs !== undefined
        ? idleRequest(parsed, idleStreamMs, context.signal, `the ${spec.method.name} request`)
        : parsed;
    const it = transformInvokeImplementation(
      spec,
      context,
      opt.interceptors,
    )(input)[Symbol.asyncIterator]();
    // The call's signal is aborted once the response ends, however it ends.
    const messages: AsyncIterable<MessageShape<DescMessage>> = {
      [Symbol.asyncIterator]: () => ({
        next: () => it.next(),
        throw: (e: unknown) => {
          context.abort(e);
          return it.throw?.(e) ?? Promise.reject({ done: true });
        },
        return: (value?: unknown) => {
          context.abort(callEnded);
          return it.return?.(value) ?? Promise.resolve({ done: true, value });
        },
      }),
    };
    const output = serialization.getO(type.binary);
    const encode: AsyncIterableTransform<
      MessageShape<DescMessage>,
      Uint8Array
    > = compression.response === null && type.binary
      ? frameOrEncode(
          output,
          framer,
          opt.writeMaxBytes,
          recycle,
          req.contextValues?.get(responseWritableKey),
        )
      : (source) =>
          pipe(
            source,
            transformSerializeEnvelope(output),
            transformCompressEnvelope(compression.response, opt.compressMinBytes),
            transformJoinEnvelopes(),
          );
    const body = pipe(
      messages,
      encode,
      transformCatchFinally<Uint8Array>((e) => {
        context.abort(e ?? callEnded);
        if (e instanceof ConnectError) {
          setTrailerStatus(context.responseTrailer, e);
        } else if (e !== undefined) {
          setTrailerStatus(
            context.responseTrailer,
            new ConnectError("internal error", Code.Internal, undefined, undefined, e),
          );
        }
      }),
      { propagateDownStreamError: true },
    );
    return {
      ...uResponseOk,
      // Headers go out with the first body bytes, so implementations can still set them.
      body: await untilFirst(body),
      header: context.responseHeader,
      trailer: context.responseTrailer,
    };
  };
}

/**
 * parseEnvelopes parses an uncompressed binary request body into its messages as envelopes
 * complete (assembled in `chunks` when given), in one stage instead of connect's three (split,
 * decompress, parse), each of which took every 16 KiB DATA chunk through an async generator of
 * its own. Errors are connect's: a message over readMaxBytes is RESOURCE_EXHAUSTED, a body
 * that ends inside an envelope INVALID_ARGUMENT.
 */
export async function* parseEnvelopes(
  body: AsyncIterable<Uint8Array>,
  readMaxBytes: number,
  serialization: Serialization<MessageShape<DescMessage>>,
  chunks: ChunkPool | undefined,
): AsyncIterable<MessageShape<DescMessage>> {
  const reader = createEnvelopeReader(
    readMaxBytes,
    chunks === undefined ? {} : { allocate: chunks.take },
  );
  for await (const chunk of body) {
    for (const bytes of reader.push(chunk)) yield serialization.parse(bytes);
  }
  if (!reader.atBoundary) {
    throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
  }
}

/** ResponseFramer turns response messages into the bytes written for them. */
export interface ResponseFramer {
  /**
   * Returns a message as the parts to write, in order: its framer's parts, or the message
   * serialized and enveloped as connect would. A message past writeMaxBytes is
   * RESOURCE_EXHAUSTED, as in connect. Call it for the next message only once the parts of the
   * previous one have been handed to the stream.
   */
  frame(message: MessageShape<DescMessage>): readonly Uint8Array[];
}

/**
 * createResponseFramer returns the framing of one call's response. With `recycle` and the
 * call's `writable`, framed parts go to `recycle` once the stream reports every write
 * completed, checked each time a message is framed.
 */
export function createResponseFramer(
  serialization: Serialization<MessageShape<DescMessage>>,
  framer: WireFramer,
  writeMaxBytes: number,
  recycle: WireRecycler | undefined,
  writable: ResponseWritable | undefined,
): ResponseFramer {
  // Framed parts already handed out, kept until every write has completed. Parts are written
  // before the next message is framed, so once nothing is left unwritten none of them is still
  // on its way to the socket.
  const written: Uint8Array[] = [];
  const keep = recycle !== undefined && writable !== undefined;
  return {
    frame(message) {
      if (keep && written.length > 0 && writable.writableLength === 0) {
        for (const part of written.splice(0)) recycle(part);
      }
      const parts = framer(message);
      if (parts === undefined) return [encodeEnvelope(0, serialization.serialize(message))];
      const size = parts.reduce((sum, part) => sum + part.byteLength, 0) - envelopeHeaderBytes;
      if (size > writeMaxBytes) {
        throw new ConnectError(
          `message size ${size} is larger than configured writeMaxBytes ${writeMaxBytes}`,
          Code.ResourceExhausted,
        );
      }
      if (keep) written.push(...parts);
      return parts;
    },
  };
}

/** Writes each message as createResponseFramer frames it. */
function frameOrEncode(
  serialization: Serialization<MessageShape<DescMessage>>,
  framer: WireFramer,
  writeMaxBytes: number,
  recycle: WireRecycler | undefined,
  writable: ResponseWritable | undefined,
): AsyncIterableTransform<MessageShape<DescMessage>, Uint8Array> {
  return async function* (source) {
    const framing = createResponseFramer(serialization, framer, writeMaxBytes, recycle, writable);
    for await (const message of source) yield* framing.frame(message);
  };
}
