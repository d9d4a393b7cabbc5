import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { decodeRecord, encodeRecord, type NewRecord, recommit, toBase64 } from "./record.js";

const base: NewRecord = {
  v: 1,
  handle: "res_c1",
  tenant: "dev",
  runId: "run",
  callId: "c1",
  name: 'ünïcode "quoted" \\ name\n',
  contentType: "text/plain",
  sizeBytes: 4096,
  observedBytes: 4096,
  truncated: false,
  stored: "inline",
  sha256: "0".repeat(64),
  binary: true,
  lineCount: 16,
  preview: { head: "a\u0000b", tail: "\u2028", shape: "", omittedBytes: 4096, text: "[res_c1]" },
  createdMs: 1_796_094_295_331,
};

describe("encodeRecord", () => {
  it("writes JSON that decodes to the same record, an inline payload included", () => {
    const record = { ...base, inline: toBase64(randomBytes(4096)) };
    const bytes = encodeRecord(record);
    expect(decodeRecord(bytes)).toEqual(record);
    expect(JSON.parse(Buffer.from(bytes).toString("utf8"))).toEqual(record);
  });

  it("writes records without an inline payload as JSON.stringify does", () => {
    const record = { ...base, stored: "preview_only" as const };
    expect(Buffer.from(encodeRecord(record)).toString("utf8")).toBe(JSON.stringify(record));
  });

  it.each([['AAAA","handle":"res_other'], ["AA\u00e9"], ["A\\B"], ["A\nB"]])(
    "commits a stored record again with its inline text encoded afresh (a tampered store): %j",
    (inline) => {
      const stored = decodeRecord(Buffer.from(JSON.stringify({ ...base, inline })));
      const again = decodeRecord(encodeRecord(recommit(stored)));
      expect(again).toEqual({ ...base, inline: toBase64(Buffer.from(inline, "base64")) });
      expect(Buffer.from(again.inline ?? "", "base64")).toEqual(Buffer.from(inline, "base64"));
    },
  );

  it("takes inline text only as Base64 made by toBase64", () => {
    const stored = decodeRecord(encodeRecord({ ...base, inline: toBase64(Buffer.from("x")) }));
    // @ts-expect-error: text read back from a store must go through recommit first.
    expect(decodeRecord(encodeRecord(stored))).toEqual(stored);
  });
});
