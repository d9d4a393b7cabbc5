import { type DescMessage, isMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  OffloadBatchItemSchema,
  type OffloadBatchRequest,
  OffloadBatchRequestSchema,
  OffloadHeaderSchema,
  OffloadRequestSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { envelopeHeaderBytes, wireBytesField } from "@spillway/wire";

const chunkPath = [OffloadRequestSchema.field.chunk.number];

/**
 * wireRequest returns a request message as the gRPC body bytes that carry it, uncompressed.
 * An OffloadRequest chunk comes out as a prefix of at most 11 bytes (envelope header, the
 * field's tag and length) followed by the caller's chunk buffer itself, not copied; an
 * OffloadBatchRequest is written into one buffer of exactly its size (wireOffloadBatch); any
 * other message is serialized with protobuf-es into one envelope. The bytes are exactly what
 * `toBinary` inside an envelope gives.
 *
 * A message protobuf-es cannot encode (a value of the wrong type in a field, which only
 * untyped JavaScript can pass) throws INVALID_ARGUMENT with protobuf-es's words, which name
 * the field: it is the caller's argument, and the message is never sent.
 */
export function wireRequest<I extends DescMessage>(
  schema: I,
  message: MessageShape<I>,
): readonly Uint8Array[] {
  try {
    return encodeRequest(schema, message);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new ConnectError(
      `the request cannot be encoded: ${reason}`,
      Code.InvalidArgument,
      undefined,
      undefined,
      err,
    );
  }
}

function encodeRequest<I extends DescMessage>(
  schema: I,
  message: MessageShape<I>,
): readonly Uint8Array[] {
  if (
    isMessage(message, OffloadRequestSchema) &&
    message.msg.case === "chunk" &&
    message.$unknown === undefined
  ) {
    return wireBytesField(chunkPath, message.msg.value);
  }
  if (isMessage(message, OffloadBatchRequestSchema)) {
    const batch = wireOffloadBatch(message);
    if (batch !== undefined) return [batch];
  }
  const body = toBinary(schema, message);
  const frame = new Uint8Array(envelopeHeaderBytes + body.byteLength);
  new DataView(frame.buffer).setUint32(1, body.byteLength);
  frame.set(body, envelopeHeaderBytes);
  return [frame];
}

/** Protobuf tags (field number and wire type) of the length-delimited fields written here. */
const itemsTag = lengthDelimitedTag(OffloadBatchRequestSchema.field.items.number);
const headerTag = lengthDelimitedTag(OffloadBatchItemSchema.field.header.number);
const dataTag = lengthDelimitedTag(OffloadBatchItemSchema.field.data.number);

/** The one-byte tag of a length-delimited field numbered below 16. */
function lengthDelimitedTag(fieldNumber: number): number {
  return (fieldNumber << 3) | WireType.LengthDelimited;
}

/**
 * wireOffloadBatch writes an OffloadBatchRequest, envelope included, into one buffer of exactly
 * its size, copying each item's data once: protobuf-es grows its buffer by doubling and then
 * copies the result and the envelope again, some 770 KB of allocations for a batch of 32
 * 4 KiB offloads, which the SDK's collector then spent about a third of its time on. Messages
 * with unknown fields are left to protobuf-es (undefined).
 */
function wireOffloadBatch(batch: OffloadBatchRequest): Uint8Array | undefined {
  if (batch.$unknown !== undefined) return undefined;
  const headers: (Uint8Array | undefined)[] = [];
  const lengths: number[] = [];
  let total = 0;
  for (const item of batch.items) {
    if (item.$unknown !== undefined) return undefined;
    const header =
      item.header === undefined ? undefined : toBinary(OffloadHeaderSchema, item.header);
    const dataBytes = item.data.byteLength;
    const length =
      (header === undefined ? 0 : 1 + varintBytes(header.byteLength) + header.byteLength) +
      (dataBytes === 0 ? 0 : 1 + varintBytes(dataBytes) + dataBytes);
    headers.push(header);
    lengths.push(length);
    total += 1 + varintBytes(length) + length;
  }
  const out = new Uint8Array(envelopeHeaderBytes + total);
  new DataView(out.buffer).setUint32(1, total);
  let at = envelopeHeaderBytes;
  const varint = (value: number) => {
    let rest = value;
    while (rest > 0x7f) {
      out[at++] = (rest & 0x7f) | 0x80;
      rest >>>= 7;
    }
    out[at++] = rest;
  };
  batch.items.forEach((item, i) => {
    out[at++] = itemsTag;
    varint(lengths[i] as number);
    const header = headers[i];
    if (header !== undefined) {
      out[at++] = headerTag;
      varint(header.byteLength);
      out.set(header, at);
      at += header.byteLength;
    }
    if (item.data.byteLength > 0) {
      out[at++] = dataTag;
      varint(item.data.byteLength);
      out.set(item.data, at);
      at += item.data.byteLength;
    }
  });
  return out;
}

/** How many bytes the varint encoding of a non-negative 32-bit value takes. */
function varintBytes(value: number): number {
  let bytes = 1;
  for (let rest = value >>> 7; rest > 0; rest >>>= 7) bytes++;
  return bytes;
}
