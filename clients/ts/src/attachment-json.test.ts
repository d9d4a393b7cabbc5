import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ResultAttachmentSchema, Storage } from "@spillway/proto/spillway/v1/types_pb.js";
import { describe, expect, it } from "vitest";
import { attachmentJson } from "./attachment-json.js";

describe("attachmentJson", () => {
  it("names every field as the proto's JSON does, sizes as numbers, times as ISO 8601", () => {
    const a = create(ResultAttachmentSchema, {
      handle: "res_c1",
      name: "log",
      slot: "stdout",
      contentType: "text/plain",
      sizeBytes: 5_000_000_000n,
      observedBytes: 5_000_000_001n,
      lineCount: 42n,
      truncated: true,
      readable: true,
      stored: Storage.BLOB,
      sha256: "ab".repeat(32),
      createTime: timestampFromDate(new Date("2026-12-01T21:20:03.000Z")),
    });
    expect(attachmentJson(a)).toEqual({
      handle: "res_c1",
      name: "log",
      slot: "stdout",
      content_type: "text/plain",
      size_bytes: 5_000_000_000,
      observed_bytes: 5_000_000_001,
      line_count: 42,
      binary: false,
      truncated: true,
      readable: true,
      stored: "blob",
      sha256: "ab".repeat(32),
      create_time: "2026-12-01T21:20:03.000Z",
      expire_time: null,
    });
  });
});
