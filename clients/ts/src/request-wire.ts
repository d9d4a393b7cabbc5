import { type DescMessage, isMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { OffloadRequestSchema } from "./gen/spillway/v1/spillway_pb.js";

/** A gRPC envelope header: one flags byte and the message length, 4 bytes big-endian. */
const envelopeHeaderBytes = 5;
const chunkField = OffloadRequestSchema.field.chunk.number;

/** Writes an uncompressed envelope header for a message of `length` bytes into `into`. */
function writeEnvelopeHeader(into: Uint8Array, length: number): void {
  into[0] = 0;
  new DataView(into.buffer, into.byteOffset, envelopeHeaderBytes).setUint32(1, length);
}

/**
 * wireRequest returns a request message as the gRPC body bytes that carry it, uncompressed.
 * An OffloadRequest chunk comes out as a prefix of at most 11 bytes (envelope header, the
 * field's tag and length) followed by the caller's chunk buffer itself, not copied; any other
 * message is serialized with protobuf-es into one envelope. The bytes are exactly what
 * `toBinary` inside an envelope gives.
 */
export function wireRequest<I extends DescMessage>(
  schema: I,
  message: MessageShape<I>,
): readonly Uint8Array[] {
  if (
    isMessage(message, OffloadRequestSchema) &&
    message.msg.case === "chunk" &&
    message.$unknown === undefined
  ) {
    const data = message.msg.value;
    const field = new BinaryWriter()
      .tag(chunkField, WireType.LengthDelimited)
      .uint32(data.byteLength)
      .finish();
    const prefix = new Uint8Array(envelopeHeaderBytes + field.byteLength);
    writeEnvelopeHeader(prefix, field.byteLength + data.byteLength);
    prefix.set(field, envelopeHeaderBytes);
    return data.byteLength === 0 ? [prefix] : [prefix, data];
  }
  const body = toBinary(schema, message);
  const frame = new Uint8Array(envelopeHeaderBytes + body.byteLength);
  writeEnvelopeHeader(frame, body.byteLength);
  frame.set(body, envelopeHeaderBytes);
  return [frame];
}
