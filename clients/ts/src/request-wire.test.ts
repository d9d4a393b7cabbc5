import { create, type DescMessage, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import {
  OffloadBatchRequestSchema,
  OffloadRequestSchema,
  ReadToolOutputRequestSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
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

  it("writes an OffloadBatch into one buffer, exactly as protobuf-es encodes it", () => {
    const bytes = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + n) & 0xff);
    const header = (callId: string) => ({
      key: { tenant: "dev", runId: "r\u00e9", callId },
      name: "x".repeat(200),
      contentType: "text/plain",
      expectedSize: 5n,
    });
    const batches = [
      // Item and data lengths around the varint widths, an empty item, a headerless one.
      [{ header: header("a"), data: bytes(0) }],
      [{ data: bytes(3) }, {}],
      [
        { header: header("a"), data: bytes(127) },
        { header: header("b"), data: bytes(128) },
        { header: header("c"), data: bytes(16_383) },
        { header: header("d"), data: bytes(70_000) },
      ],
      Array.from({ length: 32 }, (_, i) => ({ header: header(`c${i}`), data: bytes(4096) })),
    ];
    for (const items of batches) {
      const batch = create(OffloadBatchRequestSchema, { items });
      const parts = wireRequest(OffloadBatchRequestSchema, batch);
      expect(parts).toHaveLength(1);
      expect(Buffer.from(parts[0] ?? [])).toEqual(connectBytes(OffloadBatchRequestSchema, batch));
    }
  });

  it("leaves a batch with unknown fields to protobuf-es, which keeps them", () => {
    const batch = create(OffloadBatchRequestSchema, { items: [{ data: new Uint8Array([1]) }] });
    const item = batch.items[0];
    if (item === undefined) throw new Error("no item");
    item.$unknown = [{ no: 9, wireType: 0, data: new Uint8Array([5]) }];
    expect(Buffer.concat(wireRequest(OffloadBatchRequestSchema, batch))).toEqual(
      connectBytes(OffloadBatchRequestSchema, batch),
    );
  });

  it("refuses a message it cannot encode with INVALID_ARGUMENT naming the field", () => {
    // What a JavaScript caller gets for a BigInt where the proto has an int32 (a window's
    // limit, beside its int64 offset), or text where it has an int64.
    const window = create(ReadToolOutputRequestSchema, {
      runId: "r",
      handle: "res_a",
      window: { case: "lines", value: { offset: 5n, limit: 3n as unknown as number } },
    });
    const batch = create(OffloadBatchRequestSchema, {
      items: [{ header: { key: { runId: "r" }, expectedSize: "ten" as unknown as bigint } }],
    });
    for (const [schema, message, field] of [
      [ReadToolOutputRequestSchema, window, "spillway.v1.LinesWindow.limit"],
      [OffloadBatchRequestSchema, batch, "spillway.v1.OffloadHeader.expected_size"],
    ] as const) {
      let thrown: unknown;
      try {
        wireRequest(schema as DescMessage, message as never);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ConnectError);
      expect((thrown as ConnectError).code).toBe(Code.InvalidArgument);
      expect((thrown as ConnectError).rawMessage).toContain(field);
    }
  });
});
