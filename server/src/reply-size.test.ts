import { create, toBinary } from "@bufbuild/protobuf";
import {
  GetServerInfoResponseSchema,
  ListRunsResponseSchema,
  RunInfoSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { ResultAttachmentSchema } from "@spillway/proto/spillway/v1/types_pb.js";
import { describe, expect, it } from "vitest";
import { handleFor } from "./keys.js";
import { createPreviewBuilder } from "./preview/preview-builder.js";
import { toAttachment } from "./record.js";
import {
  checkCapsFitReplies,
  fieldBytes,
  MAX_REPLY_BYTES,
  MAX_WINDOW_CHARS_FOR_REPLIES,
  varintBytes,
} from "./reply-size.js";

/** The longest id a segment rule admits, in four-byte characters (128 bytes). */
const longestId = "\u{10348}".repeat(32);
/** The latest time a Timestamp holds: 9999-12-31T23:59:59.999Z. */
const latestMs = 253_402_300_799_999;

describe("reply sizes", () => {
  it("counts varints and length-delimited fields as protobuf encodes them", () => {
    expect([0, 127, 128, 16_383, 16_384, 2 ** 53 - 1].map(varintBytes)).toEqual([1, 1, 2, 2, 3, 8]);
    expect(fieldBytes(300)).toBe(303);
  });

  it("keeps a ListRuns page of 1,000 of the largest runs far below the bound, so it is cut by count alone", () => {
    const run = create(RunInfoSchema, {
      runId: longestId,
      parentRunId: longestId,
      outputCount: 2n ** 63n - 1n,
      sizeBytes: 2n ** 63n - 1n,
      createTime: { seconds: BigInt(Math.floor(latestMs / 1000)), nanos: 999_999_999 },
      updateTime: { seconds: BigInt(Math.floor(latestMs / 1000)), nanos: 999_999_999 },
      expireTime: { seconds: BigInt(Math.floor(latestMs / 1000)), nanos: 999_999_999 },
    });
    const page = create(ListRunsResponseSchema, {
      runs: Array.from({ length: 1000 }, () => run),
      nextPageToken: "t".repeat(2048),
    });
    const bytes = toBinary(ListRunsResponseSchema, page).byteLength;
    expect(bytes).toBeLessThan(400_000);
    expect(bytes).toBeLessThan(MAX_REPLY_BYTES / 10);
  });

  it("keeps the largest record under 400 KB, so a page, a batch reply and a Stat always hold one", () => {
    // Head and tail of 20,000 four-byte characters each, carried in head/tail and in the text;
    // a name and content type of control characters, which the text's first line escapes to six
    // bytes each; the longest call id and slot, whose `_` and `%` the handle escapes.
    const callId = `"${"_".repeat(127)}`;
    const slot = `file:${"_".repeat(507)}`;
    const handle = handleFor(callId, slot, 1000);
    const name = "\u0001".repeat(256);
    const contentType = "\u0002".repeat(256);
    const builder = createPreviewBuilder({ contentType, headChars: 20_000, tailChars: 20_000 });
    const payload = Buffer.from("\u{10348}".repeat(50_000), "utf8");
    builder.push(payload);
    const preview = builder.finish({
      binary: false,
      lineCount: 1,
      size: payload.byteLength,
      handle,
      name,
      attempt: 1000,
    });
    const attachment = toAttachment(
      {
        v: 1,
        handle,
        tenant: "t".repeat(64),
        runId: longestId,
        callId,
        slot,
        attempt: 1000,
        name,
        contentType,
        sizeBytes: 2 ** 53 - 1,
        observedBytes: 2 ** 53 - 1,
        truncated: true,
        stored: "blob",
        sha256: "f".repeat(64),
        binary: false,
        lineCount: 2 ** 53 - 1,
        preview: {
          head: preview.head,
          tail: preview.tail,
          shape: "s".repeat(1200),
          omittedBytes: 2 ** 53 - 1,
          text: preview.text,
        },
        createdMs: latestMs,
        expiresMs: latestMs,
        json: { kind: "document", viewLines: 2 ** 53 - 1, stride: 1, checkpoints: 1 },
      },
      latestMs,
    );
    expect(preview.head.length + preview.tail.length).toBe(80_000);
    const bytes = toBinary(ResultAttachmentSchema, attachment).byteLength;
    expect(bytes).toBeGreaterThan(320_000);
    expect(bytes).toBeLessThan(400_000);
  });

  it("keeps GetServerInfo small", () => {
    const info = create(GetServerInfoResponseSchema, {
      version: "0.1.0",
      backend: "filesystem",
      tenant: "t".repeat(64),
      features: Array.from({ length: 100 }, (_, i) => `feature_${i}`),
    });
    expect(toBinary(GetServerInfoResponseSchema, info).byteLength).toBeLessThan(4096);
  });

  it("refuses a window cap whose text could pass the bound", () => {
    expect(() =>
      checkCapsFitReplies({ maxWindowChars: MAX_WINDOW_CHARS_FOR_REPLIES }),
    ).not.toThrow();
    expect(() => checkCapsFitReplies({ maxWindowChars: MAX_WINDOW_CHARS_FOR_REPLIES + 1 })).toThrow(
      /must be at most 1000000/,
    );
    // The rendered text at four bytes a character, and the rest of a trailer.
    expect(4 * MAX_WINDOW_CHARS_FOR_REPLIES + 200).toBeLessThanOrEqual(MAX_REPLY_BYTES);
  });
});
