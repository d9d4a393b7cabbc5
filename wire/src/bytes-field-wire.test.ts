import { create, toBinary } from "@bufbuild/protobuf";
import { ReadToolOutputResponseSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { bytesFieldPrefix, envelopeHeaderBytes, wireBytesField } from "./bytes-field-wire.js";
import { dataFrame, dataFramePath } from "./data-frame.js";

/** A message as protobuf-es encodes it, without the envelope header. */
const encoded = (message: ReturnType<typeof dataFrame>) =>
  toBinary(ReadToolOutputResponseSchema, message);

describe("bytesFieldPrefix", () => {
  // Sizes around every varint width of both lengths.
  const sizes = [1, 119, 120, 125, 126, 127, 128, 16_380, 16_384, 2_097_148, 2_097_152];

  it.each(sizes)("finds where the data of a %i-byte data frame begins", (size) => {
    const data = new Uint8Array(size).fill(7);
    const message = encoded(dataFrame(data));
    const prefix = bytesFieldPrefix(dataFramePath, message, message.byteLength);
    expect(prefix).toBe(message.byteLength - size);
    // The same prefix wireBytesField writes after the envelope header.
    const [written] = wireBytesField(dataFramePath, data);
    expect(prefix).toBe((written?.byteLength ?? 0) - envelopeHeaderBytes);
    // The first bytes of the message are enough to tell.
    expect(bytesFieldPrefix(dataFramePath, message.subarray(0, prefix), message.byteLength)).toBe(
      prefix,
    );
  });

  it("gives undefined when the head ends inside the prefix", () => {
    const message = encoded(dataFrame(new Uint8Array(2_097_152)));
    const prefix = message.byteLength - 2_097_152;
    for (let cut = 0; cut < prefix; cut++) {
      expect(bytesFieldPrefix(dataFramePath, message.subarray(0, cut), message.byteLength)).toBe(
        undefined,
      );
    }
  });

  it("gives undefined for any message that is not exactly the bytes field", () => {
    const others = [
      // Content of another kind.
      create(ReadToolOutputResponseSchema, {
        frame: {
          case: "content",
          value: {
            body: { case: "lines", value: { lines: [{ number: 1n, text: "x".repeat(300) }] } },
          },
        },
      }),
      create(ReadToolOutputResponseSchema, {
        frame: { case: "header", value: { handle: "h".repeat(300) } },
      }),
    ];
    for (const message of others) {
      const bytes = toBinary(ReadToolOutputResponseSchema, message);
      expect(bytesFieldPrefix(dataFramePath, bytes, bytes.byteLength)).toBeUndefined();
    }
    const frame = encoded(dataFrame(new Uint8Array(300)));
    // Another field (9, varint 1) after the content.
    const more = Buffer.concat([frame, Uint8Array.of(0x48, 0x01)]);
    expect(bytesFieldPrefix(dataFramePath, more, more.byteLength)).toBeUndefined();
    // A data frame announced as longer or shorter than its message.
    expect(bytesFieldPrefix(dataFramePath, frame, frame.byteLength + 1)).toBeUndefined();
    expect(bytesFieldPrefix(dataFramePath, frame, frame.byteLength - 1)).toBeUndefined();
    // The same layout under other field numbers.
    expect(bytesFieldPrefix([2, 2], frame, frame.byteLength)).toBeUndefined();
    expect(bytesFieldPrefix([3, 1], frame, frame.byteLength)).toBeUndefined();
  });
});
