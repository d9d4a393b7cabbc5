import { Code, ConnectError } from "@connectrpc/connect";
import { envelopeHeaderBytes } from "./bytes-field-wire.js";

/** EnvelopeReader splits a gRPC body, as it arrives, into the messages it carries. */
export interface EnvelopeReader {
  /**
   * Takes the next piece of the body and returns every message it completes, in order. A
   * message that arrived within one piece is a view of that piece; one spread over several is
   * copied once into a buffer of its own size.
   */
  push(chunk: Uint8Array): Uint8Array[];
  /** True when the body so far ends between messages (no envelope begun and unfinished). */
  readonly atBoundary: boolean;
}

/**
 * createEnvelopeReader returns a reader for the gRPC length-prefixed message framing; a
 * message spread over several pieces is assembled in a buffer from `allocate` (unzeroed by
 * default: every byte is written before the message is handed out).
 *
 * Guarantees: messages come out whole and in order however the body is split; a message
 * larger than readMaxBytes is RESOURCE_EXHAUSTED before any of it is buffered; a compressed
 * (flag 1) or otherwise flagged envelope is INTERNAL: the reader is for bodies sent without
 * compression (the SDK never accepts a response encoding; the server reads compressed
 * requests through connect's own stages).
 */
export function createEnvelopeReader(
  readMaxBytes: number,
  allocate: (bytes: number) => Uint8Array = (bytes) => Buffer.allocUnsafe(bytes),
): EnvelopeReader {
  const header = new Uint8Array(envelopeHeaderBytes);
  let headerFill = 0;
  // The message being assembled across pieces, and how much of it has arrived.
  let body: Uint8Array | undefined;
  let bodyFill = 0;

  /** Checks a complete header and returns the length of the message it announces. */
  const open = (flags: number, length: number): number => {
    if (flags !== 0) {
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
      return headerFill === 0 && body === undefined;
    },
    push(chunk) {
      const out: Uint8Array[] = [];
      const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      let pos = 0;
      while (pos < chunk.length) {
        if (body !== undefined) {
          const take = Math.min(body.length - bodyFill, chunk.length - pos);
          body.set(chunk.subarray(pos, pos + take), bodyFill);
          bodyFill += take;
          pos += take;
          if (bodyFill === body.length) {
            out.push(body);
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
          out.push(chunk.subarray(pos, pos + length));
          pos += length;
        } else {
          body = allocate(length);
          bodyFill = 0;
        }
      }
      return out;
    },
  };
}
