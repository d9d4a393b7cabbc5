import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../../../test/support/scratch-dir.js";
import {
  createLineIndexer,
  decodeLineIndexEntry,
  decodeLineIndexStride,
  encodeLineIndex,
  type LineIndex,
  lineIndexEntryRange,
  nearestIndexedLine,
} from "./line-index.js";

/** Returns the ConnectError code `fn` throws. */
function codeOf(fn: () => unknown): Code | undefined {
  try {
    fn();
  } catch (err) {
    return ConnectError.from(err).code;
  }
  return undefined;
}

/** Computes the index the slow obvious way. */
function naiveIndex(
  bytes: Uint8Array,
  stride: number,
): Omit<LineIndex, "offsets"> & { offsets: number[] } {
  const starts: number[] = [];
  if (bytes.length > 0) starts.push(0);
  bytes.forEach((b, i) => {
    if (b === 10 && i + 1 < bytes.length) starts.push(i + 1);
  });
  return {
    stride,
    lineCount: starts.length,
    size: bytes.length,
    offsets: starts.filter((_, line) => line % stride === 0),
  };
}

/** Indexes bytes fed in the given chunk sizes (cycled). */
function indexInChunks(bytes: Uint8Array, stride: number, sizes: readonly number[]): LineIndex {
  const indexer = createLineIndexer(stride);
  let at = 0;
  for (let k = 0; at < bytes.length; k++) {
    const size = sizes[k % sizes.length] ?? 1;
    indexer.push(bytes.subarray(at, at + size));
    at += size;
  }
  return indexer.finish();
}

/** A deterministic pseudo-random generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const fixtures: Record<string, string> = {
  empty: "",
  "single newline": "\n",
  "no trailing newline": "a\nb",
  "trailing newline": "a\n",
  "blank lines": "\n\n\nx\n\n",
  crlf: "one\r\ntwo\r\n\r\nthree",
  "unicode separators": "a\u2028b\nc\u0085d\ne\u2029f\n",
  "long line": `${"y".repeat(10_000)}\nshort\n`,
};

describe("createLineIndexer", () => {
  const dir = scratchDir("spillway-index-");

  for (const [name, text] of Object.entries(fixtures)) {
    it(`counts lines like wc -l for ${name}`, () => {
      const bytes = Buffer.from(text);
      const file = join(dir, `${name.replace(/ /g, "-")}.txt`);
      writeFileSync(file, bytes);
      const wc = Number(
        spawnSync("wc", ["-l", file], { encoding: "utf8" }).stdout.trim().split(/\s+/)[0],
      );
      const unterminated = bytes.length > 0 && bytes[bytes.length - 1] !== 10 ? 1 : 0;
      const ix = indexInChunks(bytes, 1, [7]);
      expect(ix.lineCount).toBe(wc + unterminated);
      expect(ix.size).toBe(bytes.length);
    });
  }

  it("gives 2 lines for a\\nb, 1 for a\\n and 0 for an empty payload", () => {
    expect(indexInChunks(Buffer.from("a\nb"), 1, [1]).lineCount).toBe(2);
    expect(indexInChunks(Buffer.from("a\n"), 1, [1]).lineCount).toBe(1);
    const empty = createLineIndexer().finish();
    expect(empty.lineCount).toBe(0);
    expect(empty.offsets.length).toBe(0);
  });

  it("records entries only for lines that exist", () => {
    const ix = indexInChunks(Buffer.from("a\nb\n"), 2, [100]);
    expect(Array.from(ix.offsets)).toEqual([0]);
    const ix2 = indexInChunks(Buffer.from("a\nb\nc"), 2, [100]);
    expect(Array.from(ix2.offsets)).toEqual([0, 4]);
  });

  it("agrees with a direct computation for 1-byte and random chunk splits", () => {
    const random = rng(42);
    const parts: string[] = [];
    for (let i = 0; i < 3000; i++) {
      const len = Math.floor(random() * 40);
      parts.push("é€x\r".repeat(len).slice(0, len) + (random() < 0.9 ? "\n" : ""));
    }
    const bytes = Buffer.from(parts.join(""));
    for (const stride of [1, 3, 64, 1024]) {
      const expected = naiveIndex(bytes, stride);
      const oneByte = indexInChunks(bytes, stride, [1]);
      expect({ ...oneByte, offsets: Array.from(oneByte.offsets) }).toEqual(expected);
      const sizes = Array.from({ length: 50 }, () => 1 + Math.floor(random() * 300));
      const randomSplit = indexInChunks(bytes, stride, sizes);
      expect({ ...randomSplit, offsets: Array.from(randomSplit.offsets) }).toEqual(expected);
    }
  });
});

describe("line index serialization", () => {
  const ix = indexInChunks(Buffer.from("l0\nl1\nl2\nl3\nl4\nl5\nl6"), 2, [5]);

  it("writes the SPLX header and little-endian float64 entries", () => {
    const bytes = encodeLineIndex(ix);
    expect(Buffer.from(bytes.subarray(0, 4)).toString("latin1")).toBe("SPLX");
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    expect(view.getUint32(4, true)).toBe(1);
    expect(view.getUint32(8, true)).toBe(2);
    expect(bytes.length).toBe(16 + 8 * ix.offsets.length);
    expect(decodeLineIndexStride(bytes)).toBe(2);
  });

  it("decodes each entry from the whole index and from an 8-byte ranged read", () => {
    const bytes = encodeLineIndex(ix);
    expect(Array.from(ix.offsets)).toEqual([0, 6, 12, 18]);
    ix.offsets.forEach((offset, k) => {
      expect(decodeLineIndexEntry(bytes, k)).toBe(offset);
      const { offset: at, length } = lineIndexEntryRange(k);
      expect(at).toBe(16 + 8 * k);
      expect(decodeLineIndexEntry(bytes.subarray(at, at + length), k)).toBe(offset);
    });
  });

  it("refuses a foreign header and a missing entry with DATA_LOSS", () => {
    const bytes = encodeLineIndex(ix);
    const foreign = Uint8Array.from(bytes);
    foreign[0] = 0x58;
    expect(codeOf(() => decodeLineIndexEntry(foreign, 0))).toBe(Code.DataLoss);
    expect(codeOf(() => decodeLineIndexEntry(bytes, ix.offsets.length))).toBe(Code.DataLoss);
  });

  it("finds the nearest indexed line at or before a line", () => {
    expect(nearestIndexedLine(2, 7, 5)).toEqual({ entry: 2, line: 4 });
    expect(nearestIndexedLine(2, 7, 100)).toEqual({ entry: 3, line: 6 });
    expect(nearestIndexedLine(1024, 0, 3)).toEqual({ entry: 0, line: 0 });
  });
});
