import type { LinePattern } from "./block-scan.js";
import type { FoundBlocks } from "./find-blocks.js";
import type { LineAnchor, LineAnchors } from "./line-anchors.js";
import type { WindowSource } from "./source.js";

/** SearchSegment is a stretch of the payload a search reads, from a line's start. */
export interface SearchSegment {
  /** Where it starts: the start of `line`. */
  readonly offset: number;
  /** 0-based number of the line starting at offset. */
  readonly line: number;
  /** The segment's bytes, from offset on (read already, or to be read). */
  readonly chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
}

/**
 * BlockSkipping says when a search of a large payload first asks the source which blocks hold
 * the text every match holds (findBlocks, on threads of their own) and then reads only those.
 */
export interface BlockSkipping {
  /** Smallest payload it is tried on; a smaller one is read whole. */
  readonly minBytes: number;
  /**
   * Bytes read first as usual: a search whose matches are frequent ends within them, before
   * any block is looked for.
   */
  readonly headBytes: number;
  /** Block length findBlocks answers in. */
  readonly blockBytes: number;
  /**
   * Most blocks, as a share of the payload's, worth reading one by one: past it the search
   * reads on as usual (its text is common, or the payload is full of escape sequences).
   */
  readonly maxBlockShare: number;
}

/** What a search of a large payload does by default: see docs/design/search-scan.md. */
export const defaultBlockSkipping: BlockSkipping = {
  minBytes: 32 * 1024 * 1024,
  headBytes: 4 * 1024 * 1024,
  blockBytes: 64 * 1024,
  maxBlockShare: 1 / 8,
};

/** A text every line a search matches may hold (see RequiredText). */
export interface HeldText {
  /** The bytes, as stored; with `folded`, the longest piece. */
  readonly text: Buffer;
  /** Other texts such a line holds too, as stored: a scan may look for the rarest instead. */
  readonly also?: readonly Buffer[];
  /**
   * For a case-insensitive search: lowercase ASCII pieces such a line holds in either case
   * (foldedPieces), each of them.
   */
  readonly folded?: readonly Buffer[];
}

/**
 * What a skipping search looks for: every line it matches holds one of `anyOf`, or, when that
 * is empty, matches `line` (which may then run over many lines: chunked).
 */
export interface RequiredText {
  /** One text per top-level alternative of the pattern (one for most patterns), or none. */
  readonly anyOf: readonly HeldText[];
  /** Whether escape bytes count as holding it (a line is matched by its visible text). */
  readonly escapes: boolean;
  /** An RE2 expression a line holding the text must also match (before its terminator). */
  readonly line?: LinePattern;
}

/**
 * blockSegments yields the segments a search from the payload's start reads when it skips
 * blocks: the first headBytes (to a line start) as usual; then, unless the search found more
 * matches there (matchesSoFar) than an eighth of the head's blocks, only the lines that meet
 * the blocks past them the source finds holding one of `required.anyOf` on a line matching
 * `required.line` (or an escape byte), each segment running from an indexed line at or before
 * its first block to one past its last (with `context` lines of context, one more indexed line
 * on each side, which the caller ensures is at least `context` lines). The source answers
 * stretch by stretch, and the segments of a stretch are yielded as soon as it is answered, so a
 * search that has its matches early stops the rest of the scan (by returning).
 * Adjacent and overlapping segments are merged, and a segment never starts before the previous
 * one ends. Where the source cannot tell (no findBlocks, too many blocks, a failure) the rest
 * is read whole from there, as one segment.
 *
 * Guarantee: every line that holds an escape byte, or holds one of the texts (any, when none
 * is named) and matches `required.line`, lies wholly inside a segment.
 */
export async function* blockSegments(
  source: WindowSource,
  required: RequiredText,
  context: number,
  skipping: BlockSkipping,
  signal: AbortSignal | undefined,
  matchesSoFar: () => number,
): AsyncGenerator<SearchSegment> {
  const { size } = source;
  const { blockBytes } = skipping;
  const anchors = source.lineAnchors(signal);
  try {
    await anchors.reach(skipping.headBytes);
    const head: LineAnchor = anchors.floor(skipping.headBytes) ?? { line: 0, offset: 0 };
    if (head.offset > 0) {
      yield { offset: 0, line: 0, chunks: await source.read(0, head.offset, signal) };
    }
    // Matches as frequent in the head as blocks read one by one may be: no blocks are looked
    // for, the search reads on as usual.
    const headBlocks = Math.ceil(head.offset / blockBytes);
    if (matchesSoFar() > Math.max(1, headBlocks * skipping.maxBlockShare)) {
      yield { ...head, chunks: await source.read(head.offset, undefined, signal) };
      return;
    }
    // Matches in the head's last `context` lines (within its last indexed stretch) owe lines
    // past it: their blocks are looked for too.
    const owing = context > 0 ? (anchors.previous() ?? { line: 0, offset: 0 }) : head;
    const from = Math.floor(owing.offset / blockBytes) * blockBytes;
    const stretches = blocksHolding(source, required, from, skipping, signal);
    const spans = spansOf(stretches, { from, size, head, anchors, required, context, skipping });
    yield* readAhead(source, spans, signal);
  } finally {
    await anchors.close();
  }
}

/**
 * The spans to read for the stretches a source answered, one batch per stretch, in order (see
 * blockSegments); the last span of a batch waits for the next stretch, which may extend it.
 */
async function* spansOf(
  stretches: AsyncIterable<FoundBlocks>,
  opts: {
    readonly from: number;
    readonly size: number;
    readonly head: LineAnchor;
    readonly anchors: LineAnchors;
    readonly required: RequiredText;
    readonly context: number;
    readonly skipping: BlockSkipping;
  },
): AsyncGenerator<Span[]> {
  const { from, size, head, anchors, required, context } = opts;
  const { blockBytes } = opts.skipping;
  /** The indexed line at or before `offset` (one more back with context), not before head. */
  const startAt = async (offset: number): Promise<LineAnchor> => {
    await anchors.reach(offset);
    let start = anchors.floor(offset) ?? { line: 0, offset: 0 };
    if (context > 0) start = anchors.previous() ?? start;
    return start.offset < head.offset ? head : start;
  };
  /** The indexed line after the one at or before `offset` (and one more with context). */
  const endAfter = async (offset: number): Promise<number> => {
    await anchors.reach(offset);
    anchors.floor(offset);
    let after = anchors.next();
    if (context > 0 && after !== undefined) {
      await anchors.reach(after.offset);
      anchors.floor(after.offset);
      after = anchors.next();
    }
    return after?.offset ?? size;
  };
  const longest = Math.max(1, ...required.anyOf.map((held) => held.text.length));
  let open: Span | undefined;
  let start = from;
  for await (const stretch of stretches) {
    if (stretch.blocks === undefined) break;
    const spans: Span[] = [];
    for (const block of stretch.blocks) {
      const first = Math.max(head.offset, block * blockBytes);
      const last = Math.min(size, (block + 1) * blockBytes + longest - 1);
      if (open !== undefined && first < open.end) {
        open.end = Math.max(open.end, await endAfter(last));
        continue;
      }
      const begin = await startAt(first);
      const end = await endAfter(last);
      if (open !== undefined && begin.offset <= open.end) {
        open.end = Math.max(open.end, end);
        continue;
      }
      // A block inside the head whose lines owe nothing past it.
      if (end <= begin.offset) continue;
      if (open !== undefined) spans.push(open);
      open = { start: begin, end };
    }
    start = stretch.to;
    if (spans.length > 0) yield spans;
  }
  if (start < size) {
    // Nothing is known from here on (the source gave up, failed or stopped short): the rest
    // is read whole.
    const rest = await startAt(start);
    if (open !== undefined && rest.offset <= open.end) open.end = size;
    else {
      if (open !== undefined) yield [open];
      open = { start: rest, end: size };
    }
  }
  if (open !== undefined) yield [open];
}

/**
 * The stretches from `from` on, and the blocks in each that hold one of required.anyOf (one
 * findBlocks per text, each allowed its share of the skipping's; with none, one for the line
 * expression alone), their answers taken together stretch by stretch; a stretch whose blocks
 * are undefined (any answer's is, the answers' stretches differ, or the source has no
 * findBlocks) ends them.
 */
async function* blocksHolding(
  source: WindowSource,
  required: RequiredText,
  from: number,
  skipping: BlockSkipping,
  signal: AbortSignal | undefined,
): AsyncGenerator<FoundBlocks> {
  const anyOf = required.anyOf.length > 0 ? required.anyOf : [{ text: Buffer.alloc(0) }];
  const scans = anyOf.map((held) =>
    source
      .findBlocks?.(
        {
          from,
          blockBytes: skipping.blockBytes,
          text: held.text,
          ...(held.also === undefined ? {} : { also: held.also }),
          escapes: required.escapes,
          ...(held.folded === undefined ? {} : { folded: held.folded }),
          ...(required.line === undefined ? {} : { line: required.line }),
          maxShare: skipping.maxBlockShare / anyOf.length,
        },
        signal,
      )
      [Symbol.asyncIterator](),
  );
  try {
    for (;;) {
      const answers = await Promise.all(scans.map((scan) => scan?.next()));
      const first = answers[0];
      // Done, or no findBlocks: whatever is left unanswered is read whole (spansOf).
      if (first === undefined || first.done === true) return;
      const found = new Set<number>();
      for (const answer of answers) {
        const blocks = answer?.done === false ? answer.value.blocks : undefined;
        if (blocks === undefined || answer?.value.to !== first.value.to) {
          yield { to: first.value.to, blocks: undefined };
          return;
        }
        for (const block of blocks) found.add(block);
      }
      yield { to: first.value.to, blocks: [...found].sort((a, b) => a - b) };
    }
  } finally {
    await Promise.all(scans.map((scan) => scan?.return?.()));
  }
}

/** A stretch of whole lines to read: from an indexed line's start to another's (or the end). */
interface Span {
  readonly start: LineAnchor;
  end: number;
}

/** Spans read ahead while the search scans an earlier one (each a few async reads). */
const spansAhead = 4;
/** Longest span read ahead into memory; a longer one is streamed when its turn comes. */
const maxAheadBytes = 256 * 1024;

/**
 * readAhead yields a segment per span, in order, as the batches of spans arrive, keeping the
 * reads of the next spansAhead short spans of a batch in flight: a search through sparse
 * matches waits for each span's reads otherwise. Chunks read ahead and never yielded go back
 * to the source; returning early returns the batches too.
 */
async function* readAhead(
  source: WindowSource,
  batches: AsyncIterable<readonly Span[]>,
  signal: AbortSignal | undefined,
): AsyncGenerator<SearchSegment> {
  const collect = async (span: Span): Promise<Uint8Array[]> => {
    const chunks: Uint8Array[] = [];
    const length = span.end - span.start.offset;
    for await (const chunk of await source.read(span.start.offset, length, signal)) {
      chunks.push(chunk);
    }
    return chunks;
  };
  const ahead: { span: Span; read: Promise<Uint8Array[]> | undefined }[] = [];
  const arriving = batches[Symbol.asyncIterator]();
  let spans: readonly Span[] = [];
  let next = 0;
  const fill = (): void => {
    while (ahead.length < spansAhead && next < spans.length) {
      const span = spans[next++] as Span;
      const short = span.end - span.start.offset <= maxAheadBytes;
      const read = short ? collect(span) : undefined;
      // Its failure surfaces when its turn comes; until then it must not count as unhandled.
      read?.catch(() => undefined);
      ahead.push({ span, read });
    }
  };
  try {
    for (;;) {
      const item = ahead.shift();
      if (item === undefined) {
        const batch = await arriving.next();
        if (batch.done === true) return;
        spans = batch.value;
        next = 0;
        fill();
        continue;
      }
      const { span, read } = item;
      const chunks =
        read === undefined
          ? await source.read(span.start.offset, span.end - span.start.offset, signal)
          : await read;
      fill();
      yield { ...span.start, chunks };
    }
  } finally {
    for (const { read } of ahead.splice(0)) {
      for (const chunk of (await read?.catch(() => undefined)) ?? []) source.release(chunk);
    }
    await arriving.return?.();
  }
}
