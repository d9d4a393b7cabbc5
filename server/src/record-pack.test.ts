import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { codeThrownBy } from "../../test/support/code-of.js";
import {
  encodeRecordPack,
  findInPack,
  isRecordPack,
  packEntryBound,
  packHeadBytes,
  packHeaderBound,
} from "./record-pack.js";

const records = [
  { key: "t/dev/r/run/h/res_a", bytes: Buffer.from('{"v":1,"handle":"res_a"}') },
  { key: 't/dev/r/run/h/res_"b"\u00e9', bytes: Buffer.from("") },
  { key: "t/dev/r/other/h/res_c", bytes: Buffer.alloc(70_000, "c") },
];

describe("record packs", () => {
  it("lay records out so that each key finds exactly its own bytes", () => {
    const pack = encodeRecordPack(records);
    expect(isRecordPack(pack)).toBe(true);
    for (const record of records) {
      const slice = findInPack(pack, record.key);
      expect(slice).toBeDefined();
      if (slice === undefined) continue;
      expect(Buffer.from(pack.subarray(slice.offset, slice.offset + slice.length))).toEqual(
        record.bytes,
      );
    }
    expect(findInPack(pack, "t/dev/r/run/h/res_missing")).toBeUndefined();
    // Only the header is needed to find a record, not the bytes before it.
    const headerEnd = pack.indexOf(0x0a) + 1;
    expect(findInPack(pack.subarray(0, headerEnd), records[2]?.key ?? "")?.offset).toBe(
      headerEnd + 24,
    );
  });

  it("keeps the header within the bound a writer computes from the keys", () => {
    const entries = records.reduce((sum, r) => sum + packEntryBound(r.key), 0);
    const headerEnd = encodeRecordPack(records).indexOf(0x0a) + 1;
    expect(headerEnd).toBeLessThanOrEqual(packHeaderBound(entries));
  });

  it("are told from a single record by their first byte", () => {
    expect(isRecordPack(Buffer.from('{"v":1}'))).toBe(false);
    expect(isRecordPack(Buffer.alloc(0))).toBe(false);
  });

  it("refuse a header readers would not find in the first bytes they read", () => {
    const many = Array.from({ length: 200 }, (_, i) => ({
      key: `t/dev/r/run/h/${"k".repeat(400)}${i}`,
      bytes: Buffer.from("{}"),
    }));
    expect(codeThrownBy(() => encodeRecordPack(many))).toBe(Code.Internal);
    const entries = many.reduce((sum, r) => sum + packEntryBound(r.key), 0);
    expect(packHeaderBound(entries)).toBeGreaterThan(packHeadBytes);
  });

  it("report a cut, unparsable or foreign header as DATA_LOSS", () => {
    const pack = encodeRecordPack(records);
    for (const bad of [
      pack.subarray(0, 20),
      Buffer.from("[not json\n{}"),
      Buffer.from('["other-format",1,[]]\n'),
      Buffer.from('["spillway-records",2,[]]\n'),
      Buffer.from('["spillway-records",1,[["t/dev/r/run/h/res_a",-1,3]]]\n'),
      Buffer.from('["spillway-records",1,[["t/dev/r/run/h/res_a",0,"3"]]]\n'),
    ]) {
      expect(codeThrownBy(() => findInPack(bad, "t/dev/r/run/h/res_a"))).toBe(Code.DataLoss);
    }
  });
});
