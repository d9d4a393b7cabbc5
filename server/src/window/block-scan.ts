import type { FoldedPlan, FoldedStreams, findFolded } from "./folded-text.js";

/** LinePattern is an RE2 expression and its flags, as a line matcher compiles it. */
export interface LinePattern {
  readonly source: string;
  readonly flags: string;
  /**
   * The expression to run over many lines at once in multi-line mode (flags `gm` added): every
   * line that `source` matches alone holds the start of one of its matches (chunkExpression).
   * Unset for expressions that may not be (`\A`, `\z`, multi-line mode turned off).
   */
  readonly chunked?: string;
}

/**
 * BlockScanTask asks which blocks of a payload hold a text: the blocks are `blockBytes` long
 * and aligned in the payload (block k is [k·blockBytes, (k+1)·blockBytes)), and a block holds
 * the text when an occurrence of it starts inside the block.
 */
export interface BlockScanTask {
  /** First byte scanned: a multiple of blockBytes. */
  readonly from: number;
  /** End of the scanned range (exclusive): a multiple of blockBytes, or the payload's size. */
  readonly to: number;
  /** The payload's size: bytes past `to`, up to it, are read to see occurrences that straddle. */
  readonly size: number;
  readonly blockBytes: number;
  /** Bytes read at a time: a multiple of blockBytes. */
  readonly spanBytes: number;
  /** The text looked for; it holds no `\n`. Unused (empty) with `byExpression`. */
  readonly text: Uint8Array;
  /**
   * Look for lines matching `line` (chunked) by running it over each span in multi-line mode
   * (findMatch, in scanBlocks), not for the text: for a text so common that testing each line
   * holding it costs more, or an expression that names none.
   */
  readonly byExpression?: boolean;
  /**
   * Set when the text is lowercase ASCII looked for ASCII case aside (findFolded, with this
   * plan); probeAt and probeLength are then unused.
   */
  readonly folded?: FoldedPlan;
  /** Where in `text` its probe starts (a piece found by memchr on a rare byte), or -1: none. */
  readonly probeAt: number;
  /** Length of the probe, when probeAt is set. */
  readonly probeLength: number;
  /** A block holding an escape byte (0x1b) counts as holding the text too. */
  readonly escapes: boolean;
  /**
   * An expression the line holding an occurrence must match too (lineMatches, in scanBlocks):
   * an occurrence on a line that does not is passed over.
   */
  readonly line?: LinePattern;
  /** Most blocks found, over every task sharing `progress`, before all of them give up. */
  readonly cap: number;
  /** Most blocks found, as a share of the blocks a task has scanned, before it gives up. */
  readonly maxShare: number;
}

/**
 * Reads `length` bytes of the payload at `position` into `into` from byte 0, returning how
 * many it read (fewer only at the payload's end).
 */
export type BlockRead = (into: Uint8Array, length: number, position: number) => number;

/**
 * Finds where the next match of an expression starts in `text`, at or after `from` (a line's
 * start), or -1: an RE2 expression in global multi-line mode, its lastIndex set to `from`.
 */
export type FindMatch = (text: Buffer, from: number) => number;

/**
 * scanBlocks returns the numbers, ascending, of the blocks of task's range that hold its text
 * (or an escape byte, with `escapes`). It reads the range once through `read`, in spans of
 * task.spanBytes and the text's length less one past each (into one buffer kept for the
 * scan, so the scan finds the bytes in the core's cache), and in each span looks for the next
 * occurrence from the start of the block after the last one found. Undefined when it gave up:
 * another task sharing `progress` asked all to stop (progress[0] set), together they found
 * more than task.cap blocks (progress[1] counts them), or more than task.maxShare of the
 * blocks it scanned qualify (past its first 16 spans).
 *
 * With `lineMatches` (task.line compiled), an occurrence counts only when its line (without its
 * `\n` and a `\r` ending it, as the line splitter cuts it) matches, or when the line runs past
 * the bytes read around the span, where it cannot be told.
 *
 * With task.byExpression (and `findMatch`, the line expression compiled for multi-line mode),
 * the blocks are those where a line starts (in the range) that holds an escape byte, matches
 * alone (lineMatches), or runs more than 64 KiB past the span it starts in, where it cannot be
 * told; each span's lines are scanned by findMatch from their first line's start.
 *
 * `fold` is findFolded (folded-text.ts), handed in: scanBlocks runs on worker threads from its
 * source text (scan-pool.ts), so it uses nothing but its arguments and globals.
 */
export function scanBlocks(
  task: BlockScanTask,
  read: BlockRead,
  progress: Int32Array,
  fold: typeof findFolded,
  lineMatches?: (line: Buffer) => boolean,
  findMatch?: FindMatch,
): number[] | undefined {
  const { from, to, size, blockBytes, spanBytes, probeAt, probeLength, escapes, cap, folded } =
    task;
  const text = Buffer.from(task.text.buffer, task.text.byteOffset, task.text.byteLength);
  const probe = probeAt < 0 ? text : text.subarray(probeAt, probeAt + probeLength);
  const shift = Math.max(0, probeAt);
  const lines = task.byExpression === true ? findMatch : undefined;
  // A cache line into its memory: a read into a page-aligned buffer at a page-aligned file
  // position copies at a fifth of the speed (4K aliasing, see backends/chunk-pool.ts). By
  // expression, the lines that start in a span are read to their ends, up to 64 KiB past it.
  const room = spanBytes + (lines === undefined ? text.length - 1 : 65_536);
  const buffer = Buffer.from(Buffer.allocUnsafeSlow(room + 64).buffer, 64, room);
  const found: number[] = [];
  // A probe that proves common hands over to the whole text's own search, as in literal-finder.
  let probeHits = 0;
  let plain = probeAt < 0;
  let spans = 0;
  const streams: FoldedStreams = {
    view: undefined,
    lower: -1,
    lowerFrom: 0,
    upper: -1,
    upperFrom: 0,
    stops: 0,
  };
  /** Records the block holding payload offset `offset`; false when the scan must give up. */
  const record = (offset: number): boolean => {
    found.push(Math.floor(offset / blockBytes));
    if (Atomics.add(progress, 1, 1) + 1 > cap) {
      Atomics.store(progress, 0, 1);
      return false;
    }
    return true;
  };
  /**
   * Records the blocks where the lines starting in a span begin that hold an escape byte (with
   * `escapes`), match alone, or end past the bytes read (`view`, read at payload offset
   * `start`; the span is its first `spanEnd` bytes, and its first line starts at 0 when
   * `startsLine`, else after its first `\n`); false when the scan must give up.
   */
  const scanLines = (view: Buffer, start: number, spanEnd: number, startsLine: boolean) => {
    const matches = lines as FindMatch;
    // findMatch sees only lines that end inside the view: one running past it counts untested.
    const end = start + view.length >= size ? view.length : view.lastIndexOf(10) + 1;
    const complete = view.subarray(0, end);
    let at = startsLine ? 0 : view.indexOf(10) + 1;
    if (at === 0 && !startsLine) return true;
    let escapeAt = -1;
    while (at < spanEnd && start + at < size) {
      if (escapeAt < at) {
        const byte = escapes ? view.indexOf(27, at) : -1;
        escapeAt = byte < 0 ? Number.POSITIVE_INFINITY : byte;
      }
      let next = at < end ? matches(complete, at) : -1;
      let tested = next >= 0;
      // No match before `end`: the line starting there, if it runs past the view, counts.
      if (next < 0) next = end < view.length ? end : Number.POSITIVE_INFINITY;
      if (escapeAt < next) {
        next = escapeAt;
        tested = false;
      }
      if (next === Number.POSITIVE_INFINITY) return true;
      const lineStart = next === 0 ? 0 : view.lastIndexOf(10, next - 1) + 1;
      if (lineStart >= spanEnd || start + lineStart >= size) return true;
      if (tested && lineMatches !== undefined) {
        const newline = view.indexOf(10, next);
        let lineEnd = newline < 0 ? view.length : newline;
        const ended = newline >= 0 || start + view.length >= size;
        if (ended && lineEnd > lineStart && view[lineEnd - 1] === 13) lineEnd--;
        // A line holding an escape byte may match by its visible text alone: it counts.
        if (escapeAt >= lineEnd && !lineMatches(view.subarray(lineStart, lineEnd))) {
          at = newline < 0 ? view.length : newline + 1;
          continue;
        }
      }
      if (!record(start + lineStart)) return false;
      const after = (Math.floor((start + lineStart) / blockBytes) + 1) * blockBytes - start;
      const newline = view.indexOf(10, after - 1);
      if (newline < 0) return true;
      at = newline + 1;
    }
    return true;
  };
  // Whether the first span's first byte starts a line (the byte before it is a `\n`).
  let startsLine = from === 0;
  if (lines !== undefined && from > 0)
    startsLine = read(buffer, 1, from - 1) === 1 && buffer[0] === 10;
  for (let start = from; start < to; start += spanBytes) {
    if (Atomics.load(progress, 0) !== 0) return undefined;
    const got = read(buffer, Math.min(room, size - start), start);
    if (got <= 0) break;
    const view = buffer.subarray(0, got);
    // Occurrences must start inside the span (and the task's range); the bytes after are
    // read only to see an occurrence that straddles its end.
    const spanEnd = Math.min(spanBytes, to - start, got);
    let escapeAt = escapes && lines === undefined ? view.indexOf(27) : -1;
    if (lines !== undefined) {
      if (!scanLines(view, start, spanEnd, startsLine)) return undefined;
      startsLine = view[spanEnd - 1] === 10;
    }
    for (let at = 0; lines === undefined && at < spanEnd; ) {
      if (escapeAt >= 0 && escapeAt < at) escapeAt = view.indexOf(27, at);
      let next = -1;
      if (folded !== undefined) {
        const end = escapeAt >= 0 ? Math.min(spanEnd, escapeAt + 1) : spanEnd;
        next = fold(view, at, end, text, folded, streams);
      } else if (plain) next = view.indexOf(text, at);
      else {
        for (let i = view.indexOf(probe, at + shift); i >= 0; i = view.indexOf(probe, i + 1)) {
          const candidate = i - shift;
          if (candidate >= spanEnd || (escapeAt >= 0 && candidate > escapeAt)) break;
          const end = candidate + text.length;
          if (end <= got && view.compare(text, 0, text.length, candidate, end) === 0) {
            next = candidate;
            break;
          }
          if (++probeHits > 16 + (start - from + i) / 128) {
            plain = true;
            next = view.indexOf(text, candidate + 1);
            break;
          }
        }
      }
      if (
        lineMatches !== undefined &&
        next >= 0 &&
        next < spanEnd &&
        !(escapeAt >= 0 && escapeAt <= next)
      ) {
        const lineStart = view.lastIndexOf(10, next) + 1;
        const newline = view.indexOf(10, next);
        // A line that began before the bytes read, or ends after them, counts untested.
        if ((lineStart > 0 || start === 0) && (newline >= 0 || start + got >= size)) {
          let lineEnd = newline < 0 ? got : newline;
          if (lineEnd > lineStart && view[lineEnd - 1] === 13) lineEnd--;
          // A line holding an escape byte may match by its visible text alone: it counts.
          const plainLine = escapeAt < 0 || escapeAt >= lineEnd;
          if (plainLine && !lineMatches(view.subarray(lineStart, lineEnd))) {
            at = newline < 0 ? got : newline + 1;
            continue;
          }
        }
      }
      if (escapeAt >= 0 && (next < 0 || escapeAt < next)) next = escapeAt;
      if (next < 0 || next >= spanEnd) break;
      if (!record(start + next)) return undefined;
      at = (Math.floor((start + next) / blockBytes) + 1) * blockBytes - start;
    }
    spans++;
    const scanned = ((start + spanEnd - from) / blockBytes) | 0;
    // A folded piece's anchor byte that proves common: RE2's own scan is no slower.
    const common = folded !== undefined && streams.stops > 65_536 + (start + spanEnd - from) / 32;
    if (spans >= 16 && (common || found.length > scanned * task.maxShare)) {
      Atomics.store(progress, 0, 1);
      return undefined;
    }
  }
  return found;
}
