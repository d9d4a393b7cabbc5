import { create, toBinary } from "@bufbuild/protobuf";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import {
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { dataFrame } from "@spillway/wire";
import { describe, expect, it } from "vitest";
import { wireDataFrame } from "./data-frame-wire.js";

const connectBytes = (message: ReadToolOutputResponse): Uint8Array =>
  encodeEnvelope(0, toBinary(ReadToolOutputResponseSchema, message));

describe("wireDataFrame", () => {
  // Sizes around every varint width of both lengths, up to a frame larger than the 1 MiB sent.
  const sizes = [0, 1, 119, 120, 125, 126, 127, 128, 16_377, 16_380, 16_383, 16_384, 65_536];
  sizes.push(1024 * 1024, 2_097_148, 2_097_152, 3 * 1024 * 1024 + 7);

  it.each(sizes)("writes a %i-byte data frame exactly as connect encodes it", (size) => {
    const data = new Uint8Array(size);
    for (let i = 0; i < size; i++) data[i] = (i * 31 + 7) & 0xff;
    const parts = wireDataFrame(dataFrame(data));
    expect(parts).toBeDefined();
    const got = Buffer.concat(parts ?? []);
    const want = Buffer.from(connectBytes(dataFrame(data)));
    // Buffer.equals, not toEqual: a deep comparison of megabytes takes seconds.
    expect(got.byteLength).toBe(want.byteLength);
    expect(got.subarray(0, 32)).toEqual(want.subarray(0, 32));
    expect(got.equals(want)).toBe(true);
  });

  it("hands over the frame's own buffer, not a copy", () => {
    const data = new Uint8Array(1024 * 1024).fill(9);
    const parts = wireDataFrame(dataFrame(data));
    expect(parts?.at(-1)).toBe(data);
    expect(parts?.[0]?.byteLength).toBeLessThanOrEqual(17);
  });

  it("leaves every other frame to the usual encoding", () => {
    const others = [
      create(ReadToolOutputResponseSchema, {
        frame: { case: "header", value: { handle: "res_a", totalBytes: 3n } },
      }),
      create(ReadToolOutputResponseSchema, {
        frame: { case: "trailer", value: { rendered: "text", eof: true } },
      }),
      create(ReadToolOutputResponseSchema, {
        frame: {
          case: "content",
          value: { body: { case: "lines", value: { lines: [{ number: 1n, text: "a" }] } } },
        },
      }),
      create(ReadToolOutputResponseSchema, {}),
    ];
    for (const message of others) expect(wireDataFrame(message)).toBeUndefined();
  });

  it("leaves a frame with unknown fields to the usual encoding, which keeps them", () => {
    const message = dataFrame(new Uint8Array([1, 2, 3]));
    message.$unknown = [{ no: 99, wireType: 0, data: new Uint8Array([5]) }];
    expect(wireDataFrame(message)).toBeUndefined();
  });
});
