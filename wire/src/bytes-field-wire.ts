import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/** A gRPC envelope header: one flags byte and the message length, 4 bytes big-endian. */
export const envelopeHeaderBytes = 5;

/**
 * wireBytesField returns, as the parts of an uncompressed gRPC body, a message whose only
 * content is one bytes field `data`, nested in the fields `path` names (outermost first): a
 * prefix of the envelope header and each field's tag and length, then `data` itself, not
 * copied (left out when empty). The concatenation is byte for byte protobuf-es's `toBinary`
 * of that message inside an envelope.
 */
export function wireBytesField(path: readonly number[], data: Uint8Array): readonly Uint8Array[] {
  // Each field's length covers the fields inside it, so the prefixes are built inside out.
  const prefixes: Uint8Array[] = [];
  let length = data.byteLength;
  for (let i = path.length - 1; i >= 0; i--) {
    const prefix = new BinaryWriter()
      .tag(path[i] as number, WireType.LengthDelimited)
      .uint32(length)
      .finish();
    prefixes.unshift(prefix);
    length += prefix.byteLength;
  }
  const prefix = new Uint8Array(envelopeHeaderBytes + length - data.byteLength);
  // Flags 0: uncompressed.
  new DataView(prefix.buffer).setUint32(1, length);
  let at = envelopeHeaderBytes;
  for (const part of prefixes) {
    prefix.set(part, at);
    at += part.byteLength;
  }
  return data.byteLength === 0 ? [prefix] : [prefix, data];
}

/**
 * bytesFieldPrefix is the reading side of wireBytesField: given `head`, the first bytes of a
 * message of messageLength bytes (after its envelope header), it returns how many bytes
 * precede the innermost field's data when the message is exactly a bytes field nested in the
 * fields `path` names, each field running to the end of the message. Anything else (another
 * field, a different order, or a head that ends before the prefix does) gives undefined.
 */
export function bytesFieldPrefix(
  path: readonly number[],
  head: Uint8Array,
  messageLength: number,
): number | undefined {
  const reader = new BinaryReader(head);
  try {
    for (const field of path) {
      const [number, wireType] = reader.tag();
      if (number !== field || wireType !== WireType.LengthDelimited) return undefined;
      const length = reader.uint32();
      if (length !== messageLength - reader.pos) return undefined;
    }
  } catch {
    // The head ended inside a tag or a length.
    return undefined;
  }
  return reader.pos;
}
