import { type DescMessage, isMessage, type MessageShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  ReadToolOutputResponseSchema,
  WindowContentSchema,
} from "../../clients/ts/src/gen/spillway/v1/spillway_pb.js";

const contentField = ReadToolOutputResponseSchema.field.content.number;
const dataField = WindowContentSchema.field.data.number;
/** A gRPC envelope header: one flags byte and the message length, 4 bytes big-endian. */
const envelopeHeaderBytes = 5;

/** The tag and length that precede a length-delimited field's value of `length` bytes. */
function fieldPrefix(fieldNo: number, length: number): Uint8Array {
  return new BinaryWriter().tag(fieldNo, WireType.LengthDelimited).uint32(length).finish();
}

/**
 * wireDataFrame returns a bytes-mode data frame (a ReadToolOutputResponse whose content is
 * `data`) as the gRPC body bytes that carry it: a prefix of at most 17 bytes (the envelope
 * header, then each field's tag and length) followed by the frame's data buffer itself, not
 * copied. The concatenation is byte for byte what connect writes for the message (protobuf-es
 * `toBinary` inside an uncompressed envelope). Any other message, or one with unknown fields,
 * gives undefined and is encoded the usual way.
 */
export function wireDataFrame(
  message: MessageShape<DescMessage>,
): readonly Uint8Array[] | undefined {
  if (!isMessage(message, ReadToolOutputResponseSchema) || message.$unknown !== undefined) {
    return undefined;
  }
  if (message.frame.case !== "content") return undefined;
  const content = message.frame.value;
  if (content.body.case !== "data" || content.$unknown !== undefined) return undefined;
  const data = content.body.value;
  const dataPrefix = fieldPrefix(dataField, data.byteLength);
  const contentPrefix = fieldPrefix(contentField, dataPrefix.byteLength + data.byteLength);
  const messageBytes = contentPrefix.byteLength + dataPrefix.byteLength + data.byteLength;
  const prefix = new Uint8Array(
    envelopeHeaderBytes + contentPrefix.byteLength + dataPrefix.byteLength,
  );
  // Flags 0: uncompressed.
  new DataView(prefix.buffer).setUint32(1, messageBytes);
  prefix.set(contentPrefix, envelopeHeaderBytes);
  prefix.set(dataPrefix, envelopeHeaderBytes + contentPrefix.byteLength);
  return data.byteLength === 0 ? [prefix] : [prefix, data];
}
