import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { RunInfoSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { JsonKind, ResultAttachmentSchema, Storage } from "@spillway/proto/spillway/v1/types_pb.js";
import { describe, expect, it } from "vitest";
import { attachmentJson, runInfoJson } from "./record-json.js";

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
      json_kind: "none",
      json_view_lines: 0,
    });
    expect(
      attachmentJson(
        create(ResultAttachmentSchema, { jsonKind: JsonKind.LINES, jsonViewLines: 7n }),
      ),
    ).toMatchObject({ json_kind: "lines", json_view_lines: 7 });
  });
});

describe("runInfoJson", () => {
  it("names every field as the proto's JSON does, an unset time as null", () => {
    const run = create(RunInfoSchema, {
      runId: "run-1",
      outputCount: 3n,
      sizeBytes: 9_000_000_000n,
      createTime: timestampFromDate(new Date("2026-12-01T21:20:03.000Z")),
      updateTime: timestampFromDate(new Date("2026-12-01T21:21:00.000Z")),
      parentRunId: "run-0",
    });
    expect(runInfoJson(run)).toEqual({
      run_id: "run-1",
      output_count: 3,
      size_bytes: 9_000_000_000,
      create_time: "2026-12-01T21:20:03.000Z",
      update_time: "2026-12-01T21:21:00.000Z",
      expire_time: null,
      parent_run_id: "run-0",
    });
  });
});
