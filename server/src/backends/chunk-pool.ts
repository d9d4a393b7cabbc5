/**
 * ChunkPool lends read buffers and takes them back from readers that are done with them, so
 * a long read reuses a handful of buffers instead of allocating one per chunk. (Each fresh
 * megabyte counts as external memory for V8, whose collector then runs a full mark-compact
 * every few dozen megabytes read: measured, that was most of the server's CPU on a bulk read.)
 */
export interface ChunkPool {
  /**
   * A buffer of `bytes` bytes, its contents undefined: pooled memory from the pool's smallest
   * pooled size up to its chunk size, a buffer of its own (never taken back) outside that range.
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
 * Where a chunk starts in its memory. The kernel's copy between the page cache and a buffer
 * runs at a fifth of its speed on the AMD EPYC machine measured here when the buffer's address
 * and the file position agree in their low 12 bits to within about 16 bytes (preads of 1 MiB:
 * 2.5 GB/s then, 12-13 GB/s otherwise): `rep movsb` stalls on 4K aliasing, which glibc's
 * memcpy steers around and the kernel's copy does not. Large allocations are page-aligned, so
 * a chunk starts a cache line in, and a stream's reads keep to page-aligned file positions
 * after its first (readAlignBytes).
 */
const chunkStart = 64;

/**
 * createChunkPool returns a pool of buffers of chunkBytes each, keeping at most maxFree of them
 * between uses.
 *
 * Guarantees: take never waits (it allocates when nothing is free) and never refuses a size;
 * a buffer is only lent again after give, and only once per give; chunks never given back,
 * and buffers larger than a chunk or smaller than `minPooledBytes`, are collected as usual.
 * A pool that serves many small requests sets `minPooledBytes`: lending a whole chunk for a
 * few kilobytes makes each small message hold a megabyte (measured on 4 KiB offloads: that
 * churn cost a third of their throughput in collections).
 */
export function createChunkPool(
  chunkBytes: number,
  maxFree: number,
  minPooledBytes = 0,
): ChunkPool {
  const free: ArrayBuffer[] = [];
  // The memory of every chunk lent and not yet given back.
  const lent = new WeakSet<ArrayBufferLike>();
  return {
    take(bytes) {
      if (bytes > chunkBytes || bytes < minPooledBytes) return Buffer.allocUnsafeSlow(bytes);
      const memory = free.pop() ?? Buffer.allocUnsafeSlow(chunkStart + chunkBytes).buffer;
      lent.add(memory);
      return Buffer.from(memory, chunkStart, bytes);
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
 * firstReadBytes is the size of the first read of a filesystem stream (less the stream's start
 * past a multiple of readAlignBytes); each next read doubles up to readChunkBytes.
 */
export const firstReadBytes = 64 * 1024;
/**
 * readAlignBytes: a filesystem stream's first read ends at a multiple of it, so every later
 * read starts page-aligned in the file, a cache line away from its chunk's start (chunkStart).
 */
export const readAlignBytes = 4096;
