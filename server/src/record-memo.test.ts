import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { codeThrownBy } from "../../test/support/code-of.js";
import { decodeRecord, encodeRecord, type NewRecord } from "./record.js";
import { createRecordMemo } from "./record-memo.js";

function record(callId: string, text = `[res_${callId}]`): NewRecord {
  return {
    v: 1,
    handle: `res_${callId}`,
    tenant: "dev",
    runId: "run",
    callId,
    name: callId,
    contentType: "text/plain",
    sizeBytes: 10,
    observedBytes: 10,
    truncated: false,
    stored: "blob",
    sha256: "0".repeat(64),
    binary: false,
    lineCount: 1,
    preview: { head: "", tail: "", shape: "", omittedBytes: 0, text },
    createdMs: 1_796_094_295_331,
    blob: { key: "t/dev/r/run/b/c/u", stride: 256, ownerRunId: "run" },
  };
}

describe("record memo", () => {
  it("decodes as decodeRecord does, and the same bytes under a key once", () => {
    const memo = createRecordMemo();
    const bytes = encodeRecord(record("a"));
    const first = memo.decode("k/a", bytes);
    expect(first).toEqual(decodeRecord(bytes));
    // A fresh copy of the same bytes, as every read from the store is.
    expect(memo.decode("k/a", Uint8Array.from(bytes))).toBe(first);
  });

  it("serves a key's new bytes, not the record it held before", () => {
    const memo = createRecordMemo();
    memo.decode("k/a", encodeRecord(record("a", "before")));
    const now = memo.decode("k/a", encodeRecord(record("a", "after")));
    expect(now.preview.text).toBe("after");
  });

  it("keeps bytes it was handed from being changed under it", () => {
    const memo = createRecordMemo();
    const bytes = encodeRecord(record("a", "before"));
    const first = memo.decode("k/a", bytes);
    const altered = encodeRecord(record("a", "bfter!"));
    bytes.set(altered.subarray(0, bytes.byteLength));
    expect(memo.decode("k/a", bytes)).not.toBe(first);
    expect(memo.decode("k/a", encodeRecord(record("a", "before")))).toEqual(first);
  });

  it("hands out records that cannot be changed, nested fields included", () => {
    const memo = createRecordMemo();
    const shared = memo.decode("k/a", encodeRecord(record("a")));
    expect(() => {
      (shared as { name: string }).name = "changed";
    }).toThrow(TypeError);
    expect(() => {
      (shared.preview as { text: string }).text = "changed";
    }).toThrow(TypeError);
    expect(memo.decode("k/a", encodeRecord(record("a"))).name).toBe("a");
  });

  it("still refuses corrupt bytes under a key that held a good record", () => {
    const memo = createRecordMemo();
    memo.decode("k/a", encodeRecord(record("a")));
    expect(codeThrownBy(() => memo.decode("k/a", Buffer.from("{not json")))).toBe(Code.DataLoss);
  });

  it("forgets the least recently read record past maxRecords", () => {
    const memo = createRecordMemo({ maxRecords: 2, maxRecordBytes: 16 * 1024 });
    const bytes = { a: encodeRecord(record("a")), b: encodeRecord(record("b")) };
    const a = memo.decode("k/a", bytes.a);
    const b = memo.decode("k/b", bytes.b);
    expect(memo.decode("k/a", bytes.a)).toBe(a);
    memo.decode("k/c", encodeRecord(record("c")));
    expect(memo.decode("k/a", bytes.a)).toBe(a);
    expect(memo.decode("k/b", bytes.b)).not.toBe(b);
  });

  it("does not keep a record larger than maxRecordBytes", () => {
    const memo = createRecordMemo({ maxRecords: 8, maxRecordBytes: 1024 });
    const bytes = encodeRecord(record("a", "x".repeat(2048)));
    const first = memo.decode("k/a", bytes);
    const second = memo.decode("k/a", bytes);
    expect(second).toEqual(first);
    expect(second).not.toBe(first);
  });
});
