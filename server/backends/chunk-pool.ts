/**
 * ChunkPool lends read buffers and takes them back from readers that are done with them, so
 * a long read reuses a handful of buffers instead of allocating one per chunk. (Each fresh
 * megabyte counts as external memory for V8, whose collector then runs a full mark-compact
 * every few dozen megabytes read: measured, that was most of the server's CPU on a bulk read.)
 */
export interface ChunkPool {
  /**
   * A buffer of `bytes` bytes, its contents undefined: pooled memory from a sixteenth of the
   * pool's chunk size up to the chunk size, a buffer of its own (never taken back) outside
   * that range.
   */
  take(bytes: number): Buffer;
  /**
   * Hands a chunk that came from take back for reuse. The caller promises that nothing reads
   * or writes any view of the chunk's memory from now on. A chunk the pool did not lend, or
   * one already given back, is ignored.
   */
  give(chunk: Uint8Array): void;
}

/**
 * createChunkPool returns a pool of buffers of chunkBytes each, keeping at most maxFree of them
 * between uses.
 *
 * Guarantees: take never waits (it allocates when nothing is free) and never refuses a size;
 * a buffer is only lent again after give, and only once per give; chunks never given back,
 * and buffers smaller than a sixteenth of a chunk or larger than a chunk, are collected as
 * usual. (Lending a whole chunk for a few kilobytes would make every small message hold a
 * megabyte: measured, that churn made small offloads spend a tenth of their time collecting.)
 */
export function createChunkPool(chunkBytes: number, maxFree: number): ChunkPool {
  const free: ArrayBuffer[] = [];
  // The memory of every chunk lent and not yet given back.
  const lent = new WeakSet<ArrayBufferLike>();
  const smallest = Math.ceil(chunkBytes / 16);
  return {
    take(bytes) {
      if (bytes > chunkBytes || bytes < smallest) return Buffer.allocUnsafeSlow(bytes);
      const memory = free.pop() ?? Buffer.allocUnsafeSlow(chunkBytes).buffer;
      lent.add(memory);
      return Buffer.from(memory, 0, bytes);
    },
    give(chunk) {
      const memory = chunk.buffer;
      if (!lent.delete(memory)) return;
      if (free.length < maxFree) free.push(memory as ArrayBuffer);
    },
  };
}

/** readChunkBytes is the size of one read from a file: the filesystem backend's chunk. */
export const readChunkBytes = 1024 * 1024;
/**
 * firstReadBytes is the size of the first read of a filesystem stream; each next read doubles
 * up to readChunkBytes, so every chunk boundary of a stream lies on a multiple of it.
 */
export const firstReadBytes = 64 * 1024;
