import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";
import { encodeEnvelope, type Serialization } from "@connectrpc/connect/protocol";
import { createEnvelopeReader, envelopeHeaderBytes } from "@spillway/wire";
import type { ChunkPool } from "./backends/chunk-pool.js";

/**
 * WireFramer returns a response message as the gRPC body bytes it stands for (envelope
 * included), in parts written one after another, or undefined to let the message be serialized
 * the usual way. Parts are written as they are, so a part may be the very buffer the message
 * holds: a 1 MiB data frame then costs a prefix of a few bytes instead of four 1 MiB copies.
 */
export type WireFramer = (message: MessageShape<DescMessage>) => readonly Uint8Array[] | undefined;

/**
 * WireRecycler takes framed parts back once they are written: the framer's parts are handed
 * over to the wire (the message that held them is not used again), so parts whose memory came
 * from a pool may return to it.
 */
export type WireRecycler = (part: Uint8Array) => void;

/** GrpcWireOptions are how the direct gRPC path moves message bytes to and from the wire. */
export interface GrpcWireOptions {
  /** Frames response messages it recognises without serializing them. */
  readonly framer: WireFramer;
  /** Takes framed parts back once written (see WireRecycler). */
  readonly recycle?: WireRecycler;
  /**
   * Where request messages spread over several DATA chunks are assembled. The call's handler
   * may hand a message's bytes back through requestChunkReleaseKey once it is done with them;
   * messages it never hands back are collected as usual.
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
 * parseEnvelopes parses an uncompressed binary request body into its messages as envelopes
 * complete (assembled in `chunks` when given), in one stage instead of connect's three (split,
 * decompress, parse), each of which took every 16 KiB DATA chunk through an async generator of
 * its own. A message over readMaxBytes is RESOURCE_EXHAUSTED; a body that ends inside an
 * envelope and a message that is not the method's protobuf are INVALID_ARGUMENT; an envelope
 * flagged compressed is INTERNAL (the gRPC protocol's code for it).
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
    for (const bytes of reader.push(chunk)) {
      let message: MessageShape<DescMessage>;
      try {
        message = serialization.parse(bytes);
      } catch (err) {
        throw asClientFault(err);
      }
      yield message;
    }
  }
  if (!reader.atBoundary) {
    throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
  }
}

/**
 * A request message the server cannot read is the client's fault: connect's INTERNAL for a
 * message that is not the method's protobuf (invalid UTF-8 in a string field, a length past
 * the end) becomes INVALID_ARGUMENT, as the Connect protocol's JSON path and connect-go answer.
 * (An envelope flagged compressed without an encoding stays INTERNAL, as the gRPC protocol and
 * connectrpc's conformance suite require.)
 */
function asClientFault(err: unknown): unknown {
  if (!(err instanceof ConnectError) || err.code !== Code.Internal) return err;
  return new ConnectError(
    `request: ${err.rawMessage}`,
    Code.InvalidArgument,
    undefined,
    undefined,
    err,
  );
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
