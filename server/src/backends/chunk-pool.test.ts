import { describe, expect, it } from "vitest";
import { createChunkPool } from "./chunk-pool.js";

describe("createChunkPool", () => {
  it("lends the memory of a chunk given back, once", () => {
    const pool = createChunkPool(1024, 4);
    const first = pool.take(1024);
    pool.give(first);
    const second = pool.take(100);
    expect(second.buffer).toBe(first.buffer);
    expect(second.byteLength).toBe(100);
    // The pool has nothing free now: a second give of the same chunk must not make it lendable twice.
    pool.give(first);
    pool.give(second);
    const third = pool.take(1024);
    const fourth = pool.take(1024);
    expect(third.buffer).toBe(first.buffer);
    expect(fourth.buffer).not.toBe(first.buffer);
  });

  it("lends chunks that start a cache line into their memory, off the page boundary", () => {
    // The kernel copies to and from page-aligned buffers at a fraction of its speed on AMD EPYC.
    const pool = createChunkPool(1024, 4);
    const chunk = pool.take(1024);
    expect(chunk.byteOffset).toBe(64);
    pool.give(chunk);
    expect(pool.take(10).byteOffset).toBe(64);
  });

  it("takes back a view of a lent chunk as the whole chunk", () => {
    const pool = createChunkPool(1024, 4);
    const chunk = pool.take(1024);
    pool.give(chunk.subarray(10, 20));
    expect(pool.take(1024).buffer).toBe(chunk.buffer);
  });

  it("ignores memory it did not lend", () => {
    const pool = createChunkPool(1024, 4);
    const foreign = new Uint8Array(1024);
    pool.give(foreign);
    expect(pool.take(1024).buffer).not.toBe(foreign.buffer);
  });

  it("keeps at most maxFree chunks between uses", () => {
    const pool = createChunkPool(64, 2);
    const lent = [pool.take(64), pool.take(64), pool.take(64)];
    for (const chunk of lent) pool.give(chunk);
    const again = [pool.take(64), pool.take(64), pool.take(64)];
    const reused = again.filter((c) => lent.some((l) => l.buffer === c.buffer));
    expect(reused).toHaveLength(2);
  });

  it("hands out a buffer of its own below minPooledBytes", () => {
    const pool = createChunkPool(1024, 2, 64);
    const chunk = pool.take(1024);
    pool.give(chunk);
    const small = pool.take(63);
    expect(small.byteLength).toBe(63);
    expect(small.buffer).not.toBe(chunk.buffer);
    expect(small.buffer.byteLength).toBe(63);
    pool.give(small);
    // The pooled chunk is still the one lent next, and the small buffer never is.
    expect(pool.take(64).buffer).toBe(chunk.buffer);
    expect(pool.take(1024).buffer).not.toBe(small.buffer);
  });

  it("hands out a larger buffer of its own and never lends that memory again", () => {
    const pool = createChunkPool(64, 2);
    const large = pool.take(65);
    expect(large.byteLength).toBe(65);
    pool.give(large);
    expect(pool.take(64).buffer).not.toBe(large.buffer);
    expect(pool.take(65).buffer).not.toBe(large.buffer);
  });
});
