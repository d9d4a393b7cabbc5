import { isUtf8 } from "node:buffer";

/** TextSniffer decides, in one streaming pass, whether a payload is UTF-8 text. */
export interface TextSniffer {
  /** Feeds the next chunk of the payload; chunks may split a UTF-8 sequence anywhere. */
  push(chunk: Uint8Array): void;
  /** Ends the payload; `binary` is true for invalid UTF-8, a NUL byte or a truncated sequence. */
  finish(): { binary: boolean };
}

/** Byte length a UTF-8 lead byte announces, or 0 for a byte that cannot start a sequence. */
function sequenceLength(lead: number): number {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/**
 * Start of the incomplete UTF-8 sequence at the end of `bytes`, or `bytes.length` when the
 * bytes end on a sequence boundary (or on bytes that are invalid anyway, which the validator
 * then reports). Looks at most 3 bytes back.
 */
function incompleteTailStart(bytes: Uint8Array): number {
  const end = bytes.length;
  for (let i = end - 1; i >= 0 && i >= end - 3; i--) {
    const b = bytes[i] ?? 0;
    if ((b & 0xc0) === 0x80) continue;
    const need = sequenceLength(b);
    return need > 1 && end - i < need ? i : end;
  }
  return end;
}

/**
 * createTextSniffer returns a streaming UTF-8/NUL detector for payloads of any size.
 *
 * Guarantees: memory stays constant (at most 3 bytes of an unfinished sequence are carried
 * between chunks); the verdict does not depend on how the payload was chunked; once the payload
 * is known to be binary, later chunks are not inspected. A payload is binary when it is not
 * valid UTF-8 (including one that ends inside a multi-byte sequence) or contains a NUL byte.
 */
export function createTextSniffer(): TextSniffer {
  let binary = false;
  let carry = new Uint8Array(0);

  /** Completes a carried sequence with the head of `chunk`; returns how many bytes it used. */
  function completeCarry(chunk: Uint8Array): number {
    const need = sequenceLength(carry[0] ?? 0) - carry.length;
    if (chunk.length < need) {
      const longer = new Uint8Array(carry.length + chunk.length);
      longer.set(carry);
      longer.set(chunk, carry.length);
      carry = longer;
      return chunk.length;
    }
    const sequence = new Uint8Array(carry.length + need);
    sequence.set(carry);
    sequence.set(chunk.subarray(0, need), carry.length);
    carry = new Uint8Array(0);
    if (!isUtf8(sequence)) binary = true;
    return need;
  }

  return {
    push(chunk) {
      if (binary || chunk.length === 0) return;
      const view = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
      if (view.indexOf(0) !== -1) {
        binary = true;
        return;
      }
      const start = carry.length > 0 ? completeCarry(view) : 0;
      if (binary || start === view.length) return;
      const rest = view.subarray(start);
      const cut = incompleteTailStart(rest);
      if (!isUtf8(rest.subarray(0, cut))) {
        binary = true;
        return;
      }
      // Copy the carried bytes: the caller may reuse the chunk's memory after push returns.
      carry = Uint8Array.from(rest.subarray(cut));
    },
    finish() {
      return { binary: binary || carry.length > 0 };
    },
  };
}
