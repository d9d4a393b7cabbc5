/**
 * The framing connectconformance uses on a program's stdin and stdout: each message is its
 * length as a big-endian 32-bit integer followed by its bytes.
 */

/** readSizeDelimited yields each message of `source`; a stream ending inside one throws. */
export async function* readSizeDelimited(
  source: AsyncIterable<Uint8Array>,
): AsyncGenerator<Uint8Array> {
  let pending = new Uint8Array(0);
  for await (const chunk of source) {
    const joined = new Uint8Array(pending.byteLength + chunk.byteLength);
    joined.set(pending);
    joined.set(chunk, pending.byteLength);
    pending = joined;
    for (;;) {
      if (pending.byteLength < 4) break;
      const size = new DataView(pending.buffer, pending.byteOffset).getUint32(0);
      if (pending.byteLength < 4 + size) break;
      yield pending.slice(4, 4 + size);
      pending = pending.subarray(4 + size);
    }
  }
  if (pending.byteLength > 0) {
    throw new Error(`input ended inside a message (${pending.byteLength} bytes left)`);
  }
}

/** sizeDelimited returns `message` with its length prefix, ready to write. */
export function sizeDelimited(message: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + message.byteLength);
  new DataView(out.buffer).setUint32(0, message.byteLength);
  out.set(message, 4);
  return out;
}
