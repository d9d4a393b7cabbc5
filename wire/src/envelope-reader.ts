import { Code, ConnectError } from "@connectrpc/connect";
import { bytesFieldPrefix, envelopeHeaderBytes } from "./bytes-field-wire.js";

/** BytesFieldPiece is some of the data of a message's bytes field, in order, not copied. */
export interface BytesFieldPiece {
  readonly piece: Uint8Array;
}

/** TrailerFrame is a gRPC-Web trailer frame's data (its header lines), whole. */
export interface TrailerFrame {
  readonly trailer: Uint8Array;
}

/** EnvelopeReader splits a gRPC body, as it arrives, into the messages it carries. */
export interface EnvelopeReader<Item = Uint8Array> {
  /**
   * Takes the next piece of the body and returns every message it completes, in order. A
   * message that arrived within one piece is a view of that piece; one spread over several is
   * copied once into a buffer of its own size, unless it is the reader's bytes field (see
   * EnvelopeReaderOptions), which comes out as pieces.
   */
  push(chunk: Uint8Array): Item[];
  /** True when the body so far ends between messages (no envelope begun and unfinished). */
  readonly atBoundary: boolean;
}

/** EnvelopeReaderOptions configure createEnvelopeReader. */
export interface EnvelopeReaderOptions {
  /** Allocates the buffer a message spread over several pieces is assembled in. */
  readonly allocate?: (bytes: number) => Uint8Array;
  /**
   * The field numbers, outermost first, of a bytes field nested in single length-delimited
   * fields (the layout wireBytesField writes). A message spread over several pieces that is
   * exactly this field is not assembled: its data comes out as BytesFieldPiece items, views of
   * the pieces as they arrive.
   */
  readonly bytesField?: readonly number[];
  /**
   * The envelope flags (gRPC-Web's 0x80) that mark a trailer frame: such an envelope comes out
   * whole as a TrailerFrame item instead of being refused.
   */
  readonly trailerFlag?: number;
}

/**
 * createEnvelopeReader returns a reader for the gRPC length-prefixed message framing; a
 * message spread over several pieces is assembled in a buffer from `allocate` (unzeroed by
 * default: every byte is written before the message is handed out), or, when it is the
 * `bytesField` message, handed out as the pieces of its data.
 *
 * Guarantees: messages come out whole and in order however the body is split; a message
 * larger than readMaxBytes is RESOURCE_EXHAUSTED before any of it is buffered; a compressed
 * (flag 1) or otherwise flagged envelope, other than a `trailerFlag` one, is INTERNAL: the reader is for bodies sent without
 * compression (the SDK never accepts a response encoding; the server reads compressed
 * requests through connect's own stages).
 */
export function createEnvelopeReader(
  readMaxBytes: number,
  opts?: EnvelopeReaderOptions & {
    readonly bytesField?: undefined;
    readonly trailerFlag?: undefined;
  },
): EnvelopeReader;
export function createEnvelopeReader(
  readMaxBytes: number,
  opts: EnvelopeReaderOptions & { readonly trailerFlag?: undefined },
): EnvelopeReader<Uint8Array | BytesFieldPiece>;
export function createEnvelopeReader(
  readMaxBytes: number,
  opts: EnvelopeReaderOptions,
): EnvelopeReader<Uint8Array | BytesFieldPiece | TrailerFrame>;
export function createEnvelopeReader(
  readMaxBytes: number,
  opts: EnvelopeReaderOptions = {},
): EnvelopeReader<Uint8Array | BytesFieldPiece | TrailerFrame> {
  const allocate = opts.allocate ?? ((bytes: number) => Buffer.allocUnsafe(bytes));
  const { bytesField, trailerFlag } = opts;
  const header = new Uint8Array(envelopeHeaderBytes);
  let headerFill = 0;
  // The message being assembled across pieces, and how much of it has arrived.
  let body: Uint8Array | undefined;
  let bodyFill = 0;
  // Bytes of the bytesField data still to come as pieces.
  let pieceLeft = 0;
  // Whether the envelope being read is a trailer frame.
  let trailer = false;
  const item = (data: Uint8Array) => (trailer ? { trailer: data } : data);

  /** Checks a complete header and returns the length of the message it announces. */
  const open = (flags: number, length: number): number => {
    trailer = flags === trailerFlag;
    if (flags !== 0 && !trailer) {
      throw new ConnectError(
        `protocol error: envelope flags 0x${flags.toString(16)} in a body sent without compression`,
        Code.Internal,
      );
    }
    if (length > readMaxBytes) {
      throw new ConnectError(
        `message size ${length} is larger than configured readMaxBytes ${readMaxBytes}`,
        Code.ResourceExhausted,
      );
    }
    return length;
  };

  return {
    get atBoundary() {
      return headerFill === 0 && body === undefined && pieceLeft === 0;
    },
    push(chunk) {
      const out: (Uint8Array | BytesFieldPiece | TrailerFrame)[] = [];
      const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      let pos = 0;
      while (pos < chunk.length) {
        if (pieceLeft > 0) {
          const take = Math.min(pieceLeft, chunk.length - pos);
          out.push({ piece: chunk.subarray(pos, pos + take) });
          pieceLeft -= take;
          pos += take;
          continue;
        }
        if (body !== undefined) {
          const take = Math.min(body.length - bodyFill, chunk.length - pos);
          body.set(chunk.subarray(pos, pos + take), bodyFill);
          bodyFill += take;
          pos += take;
          if (bodyFill === body.length) {
            out.push(item(body));
            body = undefined;
          }
          continue;
        }
        let length: number;
        if (headerFill === 0 && chunk.length - pos >= envelopeHeaderBytes) {
          length = open(chunk[pos] as number, view.getUint32(pos + 1));
          pos += envelopeHeaderBytes;
        } else {
          const take = Math.min(envelopeHeaderBytes - headerFill, chunk.length - pos);
          header.set(chunk.subarray(pos, pos + take), headerFill);
          headerFill += take;
          pos += take;
          if (headerFill < envelopeHeaderBytes) break;
          headerFill = 0;
          length = open(header[0] as number, new DataView(header.buffer).getUint32(1));
        }
        if (chunk.length - pos >= length) {
          out.push(item(chunk.subarray(pos, pos + length)));
          pos += length;
          continue;
        }
        // The field's prefix is judged from this piece alone; one cut inside it (a few bytes
        // at most) makes the message go the assembled way, which is always correct.
        const prefix =
          bytesField === undefined || trailer
            ? undefined
            : bytesFieldPrefix(bytesField, chunk.subarray(pos), length);
        if (prefix === undefined) {
          body = allocate(length);
          bodyFill = 0;
        } else {
          pos += prefix;
          pieceLeft = length - prefix;
        }
      }
      return out;
    },
  };
}
