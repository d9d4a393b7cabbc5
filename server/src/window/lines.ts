import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Line,
  LineSchema,
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import type { CpuSlice } from "../cpu-turns.js";
import { clipString, clipUtf8, countChars, type WindowCaps } from "./caps.js";
import type { LineAnchors } from "./line-anchors.js";
import {
  type LinesFooter,
  lineRowChars,
  type RowLine,
  renderLineRow,
  renderLinesFooter,
  renderLinesHeader,
  renderNoLines,
} from "./render.js";
import { type WindowSource, windowHeaderFrame } from "./source.js";
import { clipVisible, hasAnsiBytes } from "./visible-text.js";

/** ScannedLine is one line on the `\n` grid as the splitter saw it. */
export interface ScannedLine {
  /** 0-based line number. */
  readonly index: number;
  /** Byte offset of the line's first byte. */
  readonly start: number;
  /**
   * The line's first bytes without its terminator (`\n`, and a `\r` right before it or right
   * before the payload's end), at most the splitter's keepBytes. A view that is only valid
   * during the callback.
   */
  readonly head: Buffer;
  /** True when head is the whole line. */
  readonly complete: boolean;
  /** For a complete line, the offset right after its terminator (or the payload's end). */
  readonly end: number;
}

/** LineSplitter cuts a byte stream into ScannedLines with bounded memory. */
export interface LineSplitter {
  /** Feeds the next chunk; returns false once a callback asked to stop. */
  push(chunk: Uint8Array): boolean;
  /** Ends the stream, delivering a last line that has no `\n`. */
  finish(): void;
  /**
   * Goes on at `offset`, the start of 0-based line `line`, past bytes never pushed (a search
   * passing over stretches where no line can match): the lines after keep their true numbers
   * and offsets. Only between lines: throws when the bytes pushed so far end inside a line.
   */
  jump(offset: number, line: number): void;
}

/** LineSplitterOptions place the stream on the grid and say what to keep. */
export interface LineSplitterOptions {
  /** 0-based number of the line the stream starts with. */
  readonly firstLine: number;
  /** Byte offset of the stream's first byte (the start of firstLine). */
  readonly firstOffset: number;
  /** Lines before this one are counted but never assembled nor delivered. */
  readonly skipUntil: number;
  /** Most bytes of one line to assemble; longer lines are delivered incomplete. */
  readonly keepBytes: number;
  /** Receives each line in order; returns false to stop. */
  readonly onLine: (line: ScannedLine) => boolean;
  /**
   * Lets the splitter skip lines nobody needs: given a chunk and the start of a line in it,
   * returns the chunk offset of the first byte that may matter (a search candidate), or -1
   * when nothing in the rest of the chunk does. Lines wholly before it are counted, not
   * delivered. Unset, every line is delivered.
   */
  readonly nextOfInterest?: (chunk: Buffer, from: number) => number;
  /** Lines delivered right before each line of interest anyway (search context). */
  readonly linesBefore?: number;
  /** Known line starts, so skipped lines are counted from the last one instead of one by one. */
  readonly anchors?: LineAnchors;
}

const newline = 10;
const carriageReturn = 13;

/**
 * createLineSplitter returns a streaming splitter on the `\n` grid.
 *
 * Guarantees: lines arrive in order with their grid numbers and byte offsets whatever the
 * chunking; a line is assembled only up to keepBytes (+2 to settle a final `\r`), so memory is
 * bounded by keepBytes; a line longer than that is delivered as soon as it is known to be
 * longer, and its remaining bytes are only scanned for `\n` if the callback asks for more.
 * With nextOfInterest, the lines it rules out are never delivered, yet the lines that are
 * keep their true numbers and offsets, and the linesBefore lines preceding each are delivered.
 * A delivered line's head is a view valid only during the callback; once push returns the
 * splitter holds no view of the chunk, so its memory may be reused.
 */
export function createLineSplitter(opts: LineSplitterOptions): LineSplitter {
  const { skipUntil, keepBytes, onLine, nextOfInterest, linesBefore = 0, anchors } = opts;
  let index = opts.firstLine;
  let lineStart = opts.firstOffset;
  let pos = opts.firstOffset;
  let parts: Buffer[] = [];
  let partsLength = 0;
  let discarding = false;
  let stopped = false;

  /**
   * Delivers a line whose bytes (terminator excluded, `\r` included) are `raw`; `ended` says
   * they end the line, by a `\n` or the payload's end, so a `\r` last among them is removed.
   */
  function deliver(raw: Buffer, end: number, ended: boolean): void {
    const content = ended && raw[raw.length - 1] === carriageReturn ? raw.subarray(0, -1) : raw;
    const complete = content.length <= keepBytes;
    const head = complete ? content : content.subarray(0, keepBytes);
    if (!onLine({ index, start: lineStart, head, complete, end })) stopped = true;
  }

  /** Moves past the `\n` at absolute offset `at`. */
  function nextLine(at: number): void {
    index++;
    lineStart = at + 1;
  }

  /**
   * From the line starting at buf[i], skips the lines before the next one of interest (less
   * linesBefore) and returns where delivery resumes. Skipped lines are counted from the last
   * indexed line inside the skipped stretch, so a skip costs at most one index stride of scanning.
   */
  function skipAhead(buf: Buffer, base: number, i: number, of: NonNullable<typeof nextOfInterest>) {
    const found = of(buf, i);
    if (found >= 0 && found <= i) return i;
    let target = (found < 0 ? buf.lastIndexOf(newline) : buf.lastIndexOf(newline, found - 1)) + 1;
    for (let kept = 0; kept < linesBefore && target > i; kept++) {
      // buf[target - 1] ends the previous line; the one before it ends the line before that.
      target = target < 2 ? 0 : Math.max(i, buf.lastIndexOf(newline, target - 2) + 1);
    }
    if (target <= i) return i;
    const anchor = anchors?.floor(base + target);
    let at = i;
    if (anchor !== undefined && anchor.offset >= base + i) {
      index = anchor.line;
      at = anchor.offset - base;
    }
    for (
      let nl = buf.indexOf(newline, at);
      nl >= 0 && nl < target;
      nl = buf.indexOf(newline, nl + 1)
    ) {
      index++;
    }
    lineStart = base + target;
    return target;
  }

  return {
    push(chunk) {
      const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      const base = pos;
      pos += buf.length;
      let i = 0;
      while (i < buf.length && !stopped) {
        if (
          nextOfInterest !== undefined &&
          partsLength === 0 &&
          !discarding &&
          index >= skipUntil
        ) {
          i = skipAhead(buf, base, i, nextOfInterest);
          if (i >= buf.length) break;
        }
        const nl = buf.indexOf(newline, i);
        if (index < skipUntil || discarding) {
          if (nl < 0) break;
          discarding = false;
          nextLine(base + nl);
          i = nl + 1;
          continue;
        }
        if (nl >= 0 && partsLength === 0) {
          deliver(buf.subarray(i, nl), base + nl + 1, true);
          nextLine(base + nl);
          i = nl + 1;
          continue;
        }
        const segmentEnd = nl < 0 ? buf.length : nl;
        const room = keepBytes + 2 - partsLength;
        if (room > 0) {
          const piece = buf.subarray(i, Math.min(segmentEnd, i + room));
          // A line that goes on past this chunk keeps a copy of its start (at most keepBytes).
          parts.push(nl < 0 ? Buffer.from(piece) : piece);
          partsLength += piece.length;
        }
        if (nl < 0) {
          if (partsLength >= keepBytes + 2) {
            deliver(Buffer.concat(parts, partsLength), -1, false);
            parts = [];
            partsLength = 0;
            discarding = true;
          }
          break;
        }
        const raw = Buffer.concat(parts, partsLength);
        parts = [];
        partsLength = 0;
        deliver(raw, base + nl + 1, true);
        nextLine(base + nl);
        i = nl + 1;
      }
      return !stopped;
    },
    jump(offset, line) {
      if (partsLength > 0 || discarding || pos !== lineStart) {
        throw new Error(`jump to line ${line} from inside line ${index}`);
      }
      index = line;
      lineStart = offset;
      pos = offset;
    },
    finish() {
      if (stopped || partsLength === 0) return;
      deliver(Buffer.concat(parts, partsLength), pos, true);
      parts = [];
      partsLength = 0;
    },
  };
}

/** ShownLine is a line decoded for the model: clipped text and where it continues. */
export interface ShownLine extends RowLine {
  /** Byte offset of the line's first byte. */
  readonly byteOffset: number;
  /** Bytes the shown text stands for: the whole line with its terminator, or the shown part. */
  readonly coveredBytes: number;
}

// A U+FEFF that starts a line is text the payload holds; the default decoder would drop it.
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * lineKeepBytes is how many bytes of a line must be kept to show it clipped at maxLineChars:
 * 4 bytes per code point plus a `\r`, so a shorter line is always complete. Text shown
 * without escape sequences keeps 16 bytes per code point, room for a colour code around
 * every few characters; a line whose sequences take more shows fewer characters.
 */
export function lineKeepBytes(maxLineChars: number, stripAnsi = false): number {
  return maxLineChars * (stripAnsi ? 16 : 4) + 1;
}

/**
 * showLine decodes a scanned line and clips it to maxLineChars code points without ever
 * splitting a character; `continuesAt` is the byte right after the shown part. With
 * `stripAnsi`, terminal escape sequences are removed first and the cap counts only the
 * characters shown; a sequence never ends the shown part half way.
 */
export function showLine(line: ScannedLine, maxLineChars: number, stripAnsi = false): ShownLine {
  const { head } = line;
  if (stripAnsi && hasAnsiBytes(head)) {
    const clip = clipVisible(head, maxLineChars);
    const clipped = !line.complete || clip.more;
    return {
      number: line.index + 1,
      text: decoder.decode(clip.kept),
      clipped,
      continuesAt: line.start + clip.end,
      byteOffset: line.start,
      coveredBytes: clipped ? clip.end : line.end - line.start,
    };
  }
  const cut =
    line.complete && head.length <= maxLineChars ? head.length : clipUtf8(head, maxLineChars).end;
  const clipped = !line.complete || cut < head.length;
  const continuesAt = line.start + cut;
  return {
    number: line.index + 1,
    text: decoder.decode(cut === head.length ? head : head.subarray(0, cut)),
    clipped,
    continuesAt,
    byteOffset: line.start,
    coveredBytes: clipped ? cut : line.end - line.start,
  };
}

/** toLineMessage converts a shown line to its wire form. */
export function toLineMessage(line: ShownLine): Line {
  return create(LineSchema, {
    number: BigInt(line.number),
    text: line.text,
    clipped: line.clipped,
    byteOffset: BigInt(line.byteOffset),
  });
}

/** LinesRequest is a lines window with its int64 fields already converted. */
export interface LinesRequest {
  /** 0-based line to start at (counted back from the last line when fromEnd). */
  readonly offset: number;
  /** Lines asked for; undefined means the cap. */
  readonly limit: number | undefined;
  /** Count offset and limit back from the last line. */
  readonly fromEnd: boolean;
  /** Keep terminal escape sequences in the lines' text; by default they are removed. */
  readonly keepAnsi?: boolean;
  /** Leave the content frames out: the caller shows the rendered text alone. */
  readonly renderedOnly?: boolean;
}

/**
 * LineView is what a lines-style window is read from: numbered lines, how to feed them from a
 * given line on, and how the window's text names them. Lines mode views the `\n` grid; the
 * JSON view is another.
 */
export interface LineView {
  /** Lines in the whole view. */
  readonly total: number;
  /**
   * Feeds every line from `first` on to `take` until it returns false, or the `lines` lines
   * from `first` when `lines` is set; see feedLines.
   */
  feed(
    first: number,
    lines: number | undefined,
    maxLineChars: number,
    stripAnsi: boolean,
    signal: AbortSignal | undefined,
    take: (line: ShownLine) => boolean,
  ): AsyncGenerator<void, boolean>;
  /** First line of the rendered window (first and last are 1-based). */
  header(first: number, last: number): string;
  /** Last line of the rendered window. */
  footer(footer: LinesFooter): string;
  /** The whole rendered text of a window that selected nothing. */
  noLines(offset: number): string;
  /** The window's header frame. */
  headerFrame(start: number): ReadToolOutputResponse;
}

/** linesView is the `\n` grid of a payload, as lines mode reads it. */
export function linesView(source: WindowSource): LineView {
  return {
    total: source.lineCount,
    feed: (first, lines, maxLineChars, stripAnsi, signal, take) =>
      feedLines(source, first, lines, maxLineChars, stripAnsi, signal, take),
    header: (first, last) =>
      renderLinesHeader(source.handle, first, last, source.lineCount, source.size),
    footer: renderLinesFooter,
    noLines: (offset) => renderNoLines(source.handle, offset, source.lineCount),
    headerFrame: (start) => windowHeaderFrame(source, start),
  };
}

/** Lines per content frame. */
const linesPerFrame = 256;

/** Throws CANCELED when the caller went away. */
function checkAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new ConnectError("window read was cancelled", Code.Canceled);
}

/**
 * Feeds the payload from the indexed line nearest `first` through a splitter that hands every
 * shown line from `first` on to `take` until it returns false. Given `lines`, the read stops
 * where the line index says lines `first` to `first + lines - 1` have ended, so a window deep in
 * a large payload reads a stride of lines, not a chunk; lines past those may not be fed. Yields
 * after each chunk so the caller can pass on what it built; returns true when the payload ended
 * before `take` stopped.
 */
async function* feedLines(
  source: WindowSource,
  first: number,
  lines: number | undefined,
  maxLineChars: number,
  stripAnsi: boolean,
  signal: AbortSignal | undefined,
  take: (line: ShownLine) => boolean,
): AsyncGenerator<void, boolean> {
  const seek = await source.seekLine(first, signal, lines);
  const length = seek.end === undefined ? undefined : seek.end - seek.offset;
  const stream = await source.read(seek.offset, length, signal);
  // While no chunk read so far holds a byte an escape sequence starts with, no line does
  // either: one scan of each chunk spares every line its own.
  let plain = true;
  const splitter = createLineSplitter({
    firstLine: seek.line,
    firstOffset: seek.offset,
    skipUntil: first,
    keepBytes: lineKeepBytes(maxLineChars, stripAnsi),
    onLine: (line) => take(showLine(line, maxLineChars, stripAnsi && !plain)),
  });
  // The splitter keeps copies of what it needs (shown lines, a line's start that continues
  // into the next chunk), so each chunk can serve later reads.
  const ended = yield* pushChunks(source, stream, signal, (chunk) => {
    if (stripAnsi && plain) plain = !hasAnsiBytes(chunk);
    return splitter.push(chunk);
  });
  if (!ended || length !== undefined) return false;
  splitter.finish();
  return true;
}

/** Bytes pushChunks hands over in one CPU slice when given one. */
const slicedPieceBytes = 16 * 1024;

/**
 * pushChunks hands each chunk of a read to `push` (a splitter or renderer that copies what it
 * keeps), gives the chunk back to the source for later reads, and yields after each so the
 * caller can pass on what it built. Returns false once push asks to stop, true when the read
 * ended; a cancelled signal is CANCELED. With `slice`, chunks go in pieces of 16 KiB, each once
 * the slice lets it (CpuTurns), for work whose cost per byte has no useful bound (a JSON view
 * read through a stretch nested deeper than its checkpoints go).
 */
export async function* pushChunks(
  source: WindowSource,
  stream: AsyncIterable<Uint8Array>,
  signal: AbortSignal | undefined,
  push: (chunk: Uint8Array) => boolean,
  slice?: CpuSlice,
): AsyncGenerator<void, boolean> {
  for await (const chunk of stream) {
    let more = true;
    const step = slice === undefined ? chunk.length : slicedPieceBytes;
    for (let at = 0; more && at < chunk.length; at += step) {
      checkAborted(signal);
      const pause = slice?.pause(signal);
      if (pause !== undefined) await pause;
      more = push(at === 0 && step >= chunk.length ? chunk : chunk.subarray(at, at + step));
      if (at + step < chunk.length) yield;
    }
    if (chunk.length === 0) checkAborted(signal);
    source.release(chunk);
    yield;
    if (!more) return false;
  }
  return true;
}

/** Frame carrying a batch of lines. */
function linesFrame(lines: readonly ShownLine[]): ReadToolOutputResponse {
  return create(ReadToolOutputResponseSchema, {
    frame: {
      case: "content",
      value: { body: { case: "lines", value: { lines: lines.map(toLineMessage) } } },
    },
  });
}

/** Everything a lines window's trailer says. */
interface LinesOutcome {
  readonly shown: readonly ShownLine[];
  readonly next: number | undefined;
  readonly clipped: boolean;
  readonly eof: boolean;
  readonly rendered: string;
}

/** Trailer frame of a lines window. */
function linesTrailer(outcome: LinesOutcome, withText: boolean): ReadToolOutputResponse {
  const returnedBytes = outcome.shown.reduce((sum, line) => sum + line.coveredBytes, 0);
  return create(ReadToolOutputResponseSchema, {
    frame: {
      case: "trailer",
      value: {
        returnedLines: BigInt(outcome.shown.length),
        returnedBytes: BigInt(returnedBytes),
        nextOffset: outcome.next === undefined ? undefined : BigInt(outcome.next),
        clipped: outcome.clipped,
        eof: outcome.eof,
        rendered: withText ? outcome.rendered : "",
      },
    },
  });
}

/**
 * The widest footer a window that goes on to line `next` may end with: the character-cap
 * footer, or the line-cap one when the request asked for more lines than the cap.
 */
function widestFooter(
  next: number,
  fromEnd: boolean,
  overCap: boolean,
  caps: WindowCaps,
  renderFooter: (footer: LinesFooter) => string,
): string {
  const clipped = renderFooter({
    kind: "clipped",
    next,
    fromEnd,
    maxWindowChars: caps.maxWindowChars,
  });
  if (!overCap) return clipped;
  const capped = renderFooter({
    kind: "capped",
    next,
    fromEnd,
    maxWindowLines: caps.maxWindowLines,
  });
  return countChars(capped) > countChars(clipped) ? capped : clipped;
}

/** Resolves the lines a window may return: the request's limit, never above the cap. */
function windowLimit(request: LinesRequest, caps: WindowCaps): number {
  if (request.limit !== undefined && request.limit < 1) {
    throw new ConnectError(
      `lines limit must be at least 1, got ${request.limit}`,
      Code.InvalidArgument,
    );
  }
  return Math.min(request.limit ?? caps.maxWindowLines, caps.maxWindowLines);
}

/**
 * linesWindow streams one lines window: a header frame, content frames of up to 256 lines
 * (none when `request.renderedOnly`), and a trailer with the rendered text (empty when
 * `withText` is false).
 *
 * Guarantees: it reads from the nearest indexed line and stops as soon as the window is full;
 * at most `limit` (capped by maxWindowLines) lines; each line clipped at maxLineChars code
 * points; the rendered text, header and footer included, never exceeds maxWindowChars, and
 * when that cap cuts the window `next_offset` is the first line not shown. A forward window
 * starting past the last line is empty with eof set. A from_end window ends `offset` lines
 * before the last one and keeps the lines nearest to its end when the character cap bites.
 * Unless `keepAnsi`, the lines' text leaves terminal escape sequences out (showLine); numbers,
 * offsets and `returned_bytes` are those of the stored bytes either way.
 */
export async function* linesWindow(
  source: WindowSource,
  request: LinesRequest,
  caps: WindowCaps,
  withText: boolean,
  signal?: AbortSignal,
  view: LineView = linesView(source),
): AsyncGenerator<ReadToolOutputResponse> {
  const limit = windowLimit(request, caps);
  const total = view.total;
  if (request.offset >= total) {
    yield view.headerFrame(request.fromEnd ? 0 : request.offset);
    const rendered = view.noLines(request.offset);
    yield linesTrailer(
      { shown: [], next: undefined, clipped: false, eof: true, rendered },
      withText,
    );
    return;
  }
  if (request.fromEnd) {
    const overCap = request.limit !== undefined && request.limit > limit;
    yield* tailWindow(view, request, limit, overCap, caps, withText, signal);
    return;
  }

  const start = request.offset;
  const shown: ShownLine[] = [];
  let rows = "";
  let rowsChars = 0;
  let charClipped = false;
  let batch: ShownLine[] = [];
  const frames: ReadToolOutputResponse[] = [];
  yield view.headerFrame(start);
  const overCap = request.limit !== undefined && request.limit > limit;
  // Header and footer only grow with the number of the last line shown (more digits), so
  // those of the last line the window can reach bound them: a row fitting under the bound
  // fits, and only a window near the character cap renders them line by line.
  const reach = Math.min(total, start + limit);
  const frameBound =
    countChars(view.header(start + 1, reach)) +
    Math.max(
      countChars(view.footer({ kind: "end" })),
      countChars(widestFooter(reach, false, overCap, caps, view.footer)),
    );
  const rowsFit = (last: ShownLine, extra: number): boolean => {
    if (frameBound + rowsChars + extra <= caps.maxWindowChars) return true;
    const footer =
      last.number >= total
        ? view.footer({ kind: "end" })
        : widestFooter(last.number, false, overCap, caps, view.footer);
    const header = view.header(start + 1, last.number);
    return countChars(header) + countChars(footer) + rowsChars + extra <= caps.maxWindowChars;
  };

  const strip = request.keepAnsi !== true;
  const renderedOnly = request.renderedOnly === true;
  const feed = view.feed(start, limit, caps.maxLineChars, strip, signal, (line) => {
    const row = renderLineRow(line, caps.maxLineChars);
    const rowChars = lineRowChars(row, line);
    if (shown.length > 0 && !rowsFit(line, rowChars)) {
      charClipped = true;
      return false;
    }
    shown.push(line);
    rows += row;
    rowsChars += rowChars;
    if (!renderedOnly) {
      batch.push(line);
      if (batch.length === linesPerFrame) {
        frames.push(linesFrame(batch));
        batch = [];
      }
    }
    return shown.length < limit && line.number < total;
  });
  let step = await feed.next();
  while (!step.done) {
    yield* frames.splice(0);
    step = await feed.next();
  }
  const exhausted = step.value;
  yield* frames.splice(0);
  if (batch.length > 0) yield linesFrame(batch);

  const end = start + shown.length;
  const eof = exhausted || end >= total;
  const next = eof ? undefined : end;
  const countCapped = next !== undefined && !charClipped && overCap;
  const footer: LinesFooter =
    next === undefined
      ? { kind: "end" }
      : charClipped
        ? { kind: "clipped", next, fromEnd: false, maxWindowChars: caps.maxWindowChars }
        : countCapped
          ? { kind: "capped", next, fromEnd: false, maxWindowLines: caps.maxWindowLines }
          : { kind: "more", next };
  const rendered =
    shown.length === 0
      ? view.noLines(start)
      : view.header(start + 1, end) + rows + view.footer(footer);
  yield linesTrailer(
    {
      shown,
      next,
      clipped: charClipped || countCapped || shown.some((line) => line.clipped),
      eof,
      rendered: clipString(rendered, caps.maxWindowChars),
    },
    withText,
  );
}

/** The from_end half of linesWindow; see there. */
async function* tailWindow(
  view: LineView,
  request: LinesRequest,
  limit: number,
  overCap: boolean,
  caps: WindowCaps,
  withText: boolean,
  signal: AbortSignal | undefined,
): AsyncGenerator<ReadToolOutputResponse> {
  const { offset } = request;
  const total = view.total;
  const last = total - 1 - offset;
  const first = Math.max(0, last - limit + 1);
  const read: { line: ShownLine; row: string; chars: number }[] = [];
  const strip = request.keepAnsi !== true;
  const feed = view.feed(first, last - first + 1, caps.maxLineChars, strip, signal, (line) => {
    const row = renderLineRow(line, caps.maxLineChars);
    read.push({ line, row, chars: lineRowChars(row, line) });
    return line.number <= last;
  });
  while (!(await feed.next()).done) {
    // Lines are only collected here; the window is chosen once the last one is known.
  }

  // Keep the longest run of lines ending at `last` whose rendering fits the character cap.
  let keep = 0;
  let rowsChars = 0;
  for (let k = read.length - 1; k >= 0; k--) {
    const entry = read[k];
    if (entry === undefined) break;
    const shownFirst = entry.line.number - 1;
    const candidateNext = offset + (read.length - k);
    const footer =
      shownFirst === 0
        ? view.footer({ kind: "start" })
        : widestFooter(candidateNext, true, overCap, caps, view.footer);
    const frame = view.header(shownFirst + 1, last + 1) + footer;
    if (keep > 0 && countChars(frame) + rowsChars + entry.chars > caps.maxWindowChars) break;
    keep++;
    rowsChars += entry.chars;
  }
  const kept = read.slice(read.length - keep);
  const shown = kept.map((entry) => entry.line);
  const shownFirst = (shown[0]?.number ?? 1) - 1;
  const charClipped = keep < read.length;
  const next = shownFirst > 0 ? offset + shown.length : undefined;

  yield view.headerFrame(shownFirst);
  if (request.renderedOnly !== true) {
    for (let at = 0; at < shown.length; at += linesPerFrame) {
      yield linesFrame(shown.slice(at, at + linesPerFrame));
    }
  }
  const countCapped = next !== undefined && !charClipped && overCap;
  const footer: LinesFooter =
    next === undefined
      ? { kind: "start" }
      : charClipped
        ? { kind: "clipped", next, fromEnd: true, maxWindowChars: caps.maxWindowChars }
        : countCapped
          ? { kind: "capped", next, fromEnd: true, maxWindowLines: caps.maxWindowLines }
          : { kind: "earlier", next };
  const rendered =
    view.header(shownFirst + 1, last + 1) +
    kept.map((entry) => entry.row).join("") +
    view.footer(footer);
  yield linesTrailer(
    {
      shown,
      next,
      clipped: charClipped || countCapped || shown.some((line) => line.clipped),
      eof: offset === 0,
      rendered: clipString(rendered, caps.maxWindowChars),
    },
    withText,
  );
}
