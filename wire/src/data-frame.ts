import { create } from "@bufbuild/protobuf";
import {
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
  WindowContentSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";

/**
 * dataFramePath is where a bytes-mode data frame keeps its data: ReadToolOutputResponse
 * `content` (field 2), then WindowContent `data` (field 1). A data frame is "some of the
 * content, in order", so one frame's data may be carried by several frames in its place.
 */
export const dataFramePath: readonly number[] = [
  ReadToolOutputResponseSchema.field.content.number,
  WindowContentSchema.field.data.number,
];

/** dataFrame returns the bytes-mode data frame that carries data. */
export function dataFrame(data: Uint8Array): ReadToolOutputResponse {
  return create(ReadToolOutputResponseSchema, {
    frame: { case: "content", value: { body: { case: "data", value: data } } },
  });
}
