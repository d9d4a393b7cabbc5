import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { collect } from "../../../test/support/collect.js";
import { splitParts } from "./split-parts.js";

const MiB = 1024 * 1024;

async function* stream(...chunks: Buffer[]): AsyncGenerator<Buffer> {
  yield* chunks;
}

describe("splitParts", () => {
  it("cuts one 40 MiB chunk into eight 5 MiB parts without copying a byte", async () => {
    const chunk = randomBytes(40 * MiB);
    const parts = await collect(splitParts(stream(chunk), 5 * MiB));
    expect(parts.map((p) => p.byteLength)).toEqual(Array(8).fill(5 * MiB));
    parts.forEach((part, i) => {
      // A view of the chunk at the part's offset: re-concatenating per part would allocate.
      expect(part.buffer).toBe(chunk.buffer);
      expect(part.byteOffset).toBe(chunk.byteOffset + i * 5 * MiB);
    });
    expect(Buffer.concat(parts).equals(chunk)).toBe(true);
  });

  it("copies a part that spans chunks once and keeps the rest of a chunk as a view", async () => {
    const first = randomBytes(MiB);
    const second = randomBytes(12 * MiB);
    const parts = await collect(splitParts(stream(first, second), 5 * MiB));
    expect(parts.map((p) => p.byteLength)).toEqual([5 * MiB, 5 * MiB, 3 * MiB]);
    const [spanning, middle, last] = parts;
    expect(spanning?.buffer).not.toBe(first.buffer);
    expect(spanning?.buffer).not.toBe(second.buffer);
    expect(middle?.buffer).toBe(second.buffer);
    expect(last?.buffer).toBe(second.buffer);
    expect(Buffer.concat(parts).equals(Buffer.concat([first, second]))).toBe(true);
  });

  it("regroups uneven chunks into exact parts, byte for byte", async () => {
    const payload = randomBytes(12 * MiB + 3);
    const sizes = [1, 65_536, 7, 300_001, 1_048_576];
    const chunks: Buffer[] = [];
    for (let at = 0, i = 0; at < payload.byteLength; i++) {
      const size = sizes[i % sizes.length] ?? 1;
      chunks.push(payload.subarray(at, at + size));
      at += size;
    }
    const parts = await collect(splitParts(stream(...chunks), 5 * MiB));
    expect(parts.map((p) => p.byteLength)).toEqual([5 * MiB, 5 * MiB, 2 * MiB + 3]);
    expect(Buffer.concat(parts).equals(payload)).toBe(true);
  });

  it("yields no empty part: none for an empty stream, no trailer after an exact multiple", async () => {
    expect(await collect(splitParts(stream(), 5 * MiB))).toEqual([]);
    expect(await collect(splitParts(stream(Buffer.alloc(0)), 5 * MiB))).toEqual([]);
    const parts = await collect(splitParts(stream(Buffer.alloc(10 * MiB)), 5 * MiB));
    expect(parts.map((p) => p.byteLength)).toEqual([5 * MiB, 5 * MiB]);
  });

  it("yields each part as soon as its bytes have arrived", async () => {
    let pulled = 0;
    async function* counted(): AsyncGenerator<Buffer> {
      for (let i = 0; i < 20; i++) {
        pulled++;
        yield Buffer.alloc(MiB, i);
      }
    }
    const pulledAtPart: number[] = [];
    for await (const _ of splitParts(counted(), 5 * MiB)) pulledAtPart.push(pulled);
    expect(pulledAtPart).toEqual([5, 10, 15, 20]);
  });
});
