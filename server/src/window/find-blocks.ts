import { readSync } from "node:fs";
import RE2 from "re2";
import { type BlockRead, type BlockScanTask, type LinePattern, scanBlocks } from "./block-scan.js";
import { findFolded, planFoldedSearch } from "./folded-text.js";
import { commonInSample, planLiteralSearch, sampleOccurrences } from "./literal-finder.js";
import type { ScanPool } from "./scan-pool.js";

/** BlockQuery asks which blocks of a payload a search must read (WindowSource.findBlocks). */
export interface BlockQuery {
  /** First byte to scan: a multiple of blockBytes. */
  readonly from: number;
  /** Block length; blocks are aligned in the payload. */
  readonly blockBytes: number;
  /**
   * Bytes every matching line holds as stored; no `\n`. With `folded`, the longest piece.
   * Empty when the matching lines hold no text in common: `line` (chunked) is looked for.
   */
  readonly text: Buffer;
  /** Other texts every matching line holds too: the scan looks for the sample's rarest. */
  readonly also?: readonly Buffer[];
  /**
   * For a case-insensitive search: lowercase ASCII pieces every matching line holds in either
   * case (foldedPieces); the scan looks for the one the payload says is cheapest.
   */
  readonly folded?: readonly Buffer[];
  /** A block holding an escape byte counts too (lines matched without their sequences). */
  readonly escapes: boolean;
  /** An expression the line holding the text must match too; unset: holding it is enough. */
  readonly line?: LinePattern;
  /**
   * Give up once more than this share of the blocks qualify (or of those scanned so far, past
   * the first few megabytes): the search then reads on as usual.
   */
  readonly maxShare: number;
}

/** Bytes of the payload a scan learns its probe from (as the literal finder does). */
const sampleBytes = 64 * 1024;
/** Bytes a scan reads at a time: fits the core's cache beside the code scanning it. */
const spanBytes = 1024 * 1024;
/**
 * Most bytes of one task: a scan of a large payload is cut into tasks of this size, so other
 * scans take turns with it on the threads (scan-pool.ts) every few milliseconds.
 */
const taskBytes = 64 * 1024 * 1024;

/**
 * blockScanTasks cuts a query over a payload of `size` bytes into `count` tasks of whole
 * blocks (the last ends at the payload's end), planning the scan from `sample`, the bytes at
 * query.from: by expression (BlockScanTask.byExpression) when the query names no text, or
 * the rarest there of its texts (`text` and `also`) is common there (commonInSample), or an ignore-case query's pieces have no byte
 * rare enough there (planFoldedSearch), and its line expression may run over many lines;
 * else by the rarest of its texts. Undefined when it must go by expression and cannot.
 */
export function blockScanTasks(
  query: BlockQuery,
  size: number,
  count: number,
  sample: Buffer,
): BlockScanTask[] | undefined {
  const head = sample.subarray(0, sampleBytes);
  const folded = query.folded === undefined ? undefined : planFoldedSearch(query.folded, head);
  const unplanned = query.folded !== undefined && folded === undefined;
  const none = query.text.length === 0;
  // Of the texts every matching line holds, the one the sample holds least often.
  let rarest = { text: query.text, count: none ? 0 : sampleOccurrences(head, query.text) };
  for (const text of query.folded === undefined ? (query.also ?? []) : []) {
    const count = sampleOccurrences(head, text);
    if (text.length > 0 && count < rarest.count) rarest = { text, count };
  }
  const common = !none && query.folded === undefined && commonInSample(rarest.count, head);
  const byExpression = query.line?.chunked !== undefined && (none || unplanned || common);
  if (!byExpression && (none || unplanned)) return undefined;
  const text = byExpression
    ? Buffer.alloc(0)
    : folded === undefined
      ? rarest.text
      : (query.folded?.[folded.piece] as Buffer);
  const plan = byExpression || folded !== undefined ? undefined : planLiteralSearch(text, head);
  const blocks = Math.ceil((size - query.from) / query.blockBytes);
  const cap = Math.max(1, Math.floor(blocks * query.maxShare));
  const span = Math.max(1, Math.floor(spanBytes / query.blockBytes)) * query.blockBytes;
  const tasks: BlockScanTask[] = [];
  for (let k = 0; k < count; k++) {
    const first = Math.floor((blocks * k) / count);
    const last = Math.floor((blocks * (k + 1)) / count);
    if (last === first) continue;
    tasks.push({
      from: query.from + first * query.blockBytes,
      to: Math.min(size, query.from + last * query.blockBytes),
      size,
      blockBytes: query.blockBytes,
      spanBytes: span,
      text,
      ...(byExpression ? { byExpression } : {}),
      ...(folded === undefined || byExpression ? {} : { folded }),
      probeAt: plan?.anchor ?? -1,
      probeLength: plan?.probe.length ?? 0,
      escapes: query.escapes,
      ...(query.line === undefined ? {} : { line: query.line }),
      cap,
      maxShare: query.maxShare,
    });
  }
  return tasks;
}

/** A progress array for tasks that share a cap and stop together (see scanBlocks). */
function sharedProgress(signal: AbortSignal | undefined): Int32Array {
  const progress = new Int32Array(new SharedArrayBuffer(8));
  if (signal?.aborted === true) Atomics.store(progress, 0, 1);
  signal?.addEventListener("abort", () => Atomics.store(progress, 0, 1), { once: true });
  return progress;
}

/**
 * FoundBlocks is what a block scan found in one stretch of the payload: the stretches follow
 * one another from the query's `from`, each ending where the next starts.
 */
export interface FoundBlocks {
  /** End of the stretch (exclusive): a multiple of blockBytes, or the payload's size. */
  readonly to: number;
  /**
   * The blocks of the stretch holding the text (as BlockQuery says), ascending; undefined
   * when the scan gave up there (too many blocks), was stopped or failed: nothing past the
   * stretch's start is known, and no stretch follows.
   */
  readonly blocks: readonly number[] | undefined;
}

/** Blocks a task of an in-memory scan covers at most: a search may stop between tasks. */
const memoryTaskBlocks = 16;

/**
 * findBlocksInMemory answers a query over bytes held in memory, on the calling thread, a
 * stretch of up to 16 blocks at a time: the same scan the threads run, for sources without a
 * file.
 */
export function* findBlocksInMemory(
  bytes: Uint8Array,
  query: BlockQuery,
  signal?: AbortSignal,
): Generator<FoundBlocks> {
  const all = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const read: BlockRead = (into, length, position) =>
    all.copy(into, 0, position, Math.min(all.length, position + length));
  const count = Math.ceil((all.length - query.from) / (memoryTaskBlocks * query.blockBytes));
  const tasks = blockScanTasks(query, all.length, Math.max(1, count), all.subarray(query.from));
  if (tasks === undefined) {
    yield { to: all.length, blocks: undefined };
    return;
  }
  const progress = sharedProgress(signal);
  const pattern = query.line;
  const expression = pattern === undefined ? undefined : new RE2(pattern.source, pattern.flags);
  const lineMatches =
    expression === undefined ? undefined : (line: Buffer) => expression.test(line);
  const lines =
    pattern?.chunked === undefined ? undefined : new RE2(pattern.chunked, `gm${pattern.flags}`);
  const findMatch =
    lines === undefined
      ? undefined
      : (text: Buffer, at: number) => {
          lines.lastIndex = at;
          return lines.exec(text)?.index ?? -1;
        };
  for (const task of tasks) {
    const blocks = scanBlocks(task, read, progress, findFolded, lineMatches, findMatch);
    yield { to: task.to, blocks };
    if (blocks === undefined) return;
  }
}

/**
 * findBlocksOnThreads answers a query over the first `size` bytes of the file open as `fd`,
 * cut into tasks of at most 64 MiB (at least one a thread of `pool`) that the pool's threads
 * scan at once, yielding each task's stretch in order as soon as it and those before it are
 * done. Returning early (a search that has its matches) stops the tasks still running and
 * waits for them, so the descriptor need only stay open until this generator finishes. The
 * tasks take turns with other scans of the pool by `owner` (ScanPool.scan).
 */
export async function* findBlocksOnThreads(
  pool: ScanPool,
  owner: string,
  fd: number,
  size: number,
  query: BlockQuery,
  signal?: AbortSignal,
): AsyncGenerator<FoundBlocks> {
  const sample = Buffer.allocUnsafe(Math.max(0, Math.min(sampleBytes, size - query.from)));
  const got = readSync(fd, sample, 0, sample.length, query.from);
  const count = Math.max(pool.threads, Math.ceil((size - query.from) / taskBytes));
  const tasks = blockScanTasks(query, size, count, sample.subarray(0, got));
  if (tasks === undefined) {
    yield { to: size, blocks: undefined };
    return;
  }
  const progress = sharedProgress(signal);
  const results = pool.scan(fd, tasks, progress, owner);
  try {
    for (const [k, task] of tasks.entries()) {
      const blocks = await results[k];
      yield { to: task.to, blocks };
      if (blocks === undefined) return;
    }
  } finally {
    Atomics.store(progress, 0, 1);
    await Promise.all(results);
  }
}
