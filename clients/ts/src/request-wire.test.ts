import { create, toBinary } from "@bufbuild/protobuf";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { describe, expect, it } from "vitest";
import {
  OffloadRequestSchema,
  ReadToolOutputRequestSchema,
} from "./gen/spillway/v1/spillway_pb.js";
import { wireRequest } from "./request-wire.js";

const chunkRequest = (data: Uint8Array) =>
  create(OffloadRequestSchema, { msg: { case: "chunk", value: data } });

const connectBytes = <T extends Parameters<typeof toBinary>[0]>(
  schema: T,
  message: Parameters<typeof toBinary<T>>[1],
): Buffer => Buffer.from(encodeEnvelope(0, toBinary(schema, message)));

describe("wireRequest", () => {
  // Sizes around every varint width of the chunk length, up to a 4 MiB chunk.
  const sizes = [0, 1, 127, 128, 16_383, 16_384, 65_536, 1024 * 1024, 2_097_151, 2_097_152];
  sizes.push(4 * 1024 * 1024);

  it.each(sizes)("writes a %i-byte offload chunk exactly as protobuf-es encodes it", (size) => {
    const data = new Uint8Array(size);
    for (let i = 0; i < size; i++) data[i] = (i * 17 + 3) & 0xff;
    const got = Buffer.concat(wireRequest(OffloadRequestSchema, chunkRequest(data)));
    const want = connectBytes(OffloadRequestSchema, chunkRequest(data));
    // Buffer.equals, not toEqual: a deep comparison of megabytes takes seconds.
    expect(got.byteLength).toBe(want.byteLength);
    expect(got.equals(want)).toBe(true);
  });

  it("sends the caller's chunk buffer itself, not a copy", () => {
    const data = new Uint8Array(1024 * 1024).fill(7);
    const parts = wireRequest(OffloadRequestSchema, chunkRequest(data));
    expect(parts).toHaveLength(2);
    expect(parts[1]).toBe(data);
    expect(parts[0]?.byteLength).toBeLessThanOrEqual(11);
  });

  it("encodes any other message whole, exactly as protobuf-es does", () => {
    const header = create(OffloadRequestSchema, {
      msg: {
        case: "header",
        value: { key: { tenant: "t", runId: "r", callId: "c" }, contentType: "text/plain" },
      },
    });
    const read = create(ReadToolOutputRequestSchema, {
      runId: "r",
      handle: "res_c",
      window: { case: "bytes", value: { offset: 5n } },
    });
    expect(Buffer.concat(wireRequest(OffloadRequestSchema, header))).toEqual(
      connectBytes(OffloadRequestSchema, header),
    );
    expect(Buffer.concat(wireRequest(ReadToolOutputRequestSchema, read))).toEqual(
      connectBytes(ReadToolOutputRequestSchema, read),
    );
  });
});
