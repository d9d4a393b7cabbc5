import { type DescMessage, isMessage, type MessageShape } from "@bufbuild/protobuf";
import { ReadToolOutputResponseSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { dataFramePath, wireBytesField } from "@spillway/wire";

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
  return wireBytesField(dataFramePath, content.body.value);
}
