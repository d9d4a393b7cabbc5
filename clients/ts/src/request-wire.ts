import { type DescMessage, isMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { envelopeHeaderBytes, wireBytesField } from "./bytes-field-wire.js";
import { OffloadRequestSchema } from "./gen/spillway/v1/spillway_pb.js";

const chunkPath = [OffloadRequestSchema.field.chunk.number];

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
    return wireBytesField(chunkPath, message.msg.value);
  }
  const body = toBinary(schema, message);
  const frame = new Uint8Array(envelopeHeaderBytes + body.byteLength);
  new DataView(frame.buffer).setUint32(1, body.byteLength);
  frame.set(body, envelopeHeaderBytes);
  return [frame];
}
