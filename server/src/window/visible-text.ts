import { ansiSequenceAt, byteUnits, startsAnsiSequence } from "@spillway/wire";

/**
 * Model-facing text without terminal escape sequences, computed on the stored UTF-8 bytes so
 * that every cut still maps to an exact byte offset. The grammar is @spillway/wire's
 * ansiSequenceAt (docs/design/ansi-strip.md).
 */

const esc = 0x1b;
const c1Lead = 0xc2;

/** True when byte `i` may start a sequence: ESC, or 0xC2 before a C1 introducer. */
function mayStartAt(bytes: Uint8Array, i: number): boolean {
  const b = bytes[i];
  if (b === esc) return true;
  if (b !== c1Lead) return false;
  const next = bytes[i + 1] ?? 0;
  return next >= 0x80 && startsAnsiSequence(next);
}

/**
 * hasAnsiBytes is true when `bytes` hold an ESC or a UTF-8 C1 introducer, the only bytes a
 * sequence starts with; without them the text is shown exactly as stored.
 */
export function hasAnsiBytes(bytes: Uint8Array): boolean {
  return nextAnsiByte(bytes, 0) >= 0;
}

/** nextAnsiByte returns the first offset at or after `from` where a sequence may start, or -1. */
export function nextAnsiByte(bytes: Uint8Array, from: number): number {
  return createNextAnsiByte(bytes)(from);
}

/** bytes.indexOf(byte, from), looking at the next 64 bytes itself: a native call costs more. */
function indexOfByte(bytes: Uint8Array, byte: number, from: number): number {
  const near = Math.min(bytes.length, from + 64);
  for (let k = from; k < near; k++) if (bytes[k] === byte) return k;
  return near === bytes.length ? -1 : bytes.indexOf(byte, near);
}

/**
 * Returns nextAnsiByte for one buffer with ascending `from`, remembering where the next ESC and
 * the next C1 introducer are, so a scan of the whole buffer costs one pass of each, not one per
 * sequence.
 */
function createNextAnsiByte(bytes: Uint8Array): (from: number) => number {
  let escAt = -2;
  let c1At = -2;
  return (from) => {
    if (escAt !== -1 && escAt < from) escAt = indexOfByte(bytes, esc, from);
    if (c1At !== -1 && c1At < from) c1At = bytes.indexOf(c1Lead, from);
    while (c1At >= 0 && !mayStartAt(bytes, c1At)) c1At = bytes.indexOf(c1Lead, c1At + 1);
    if (c1At < 0) return escAt;
    return escAt < 0 || c1At < escAt ? c1At : escAt;
  };
}

/** stripAnsiBytes returns `bytes` without their sequences (all of them, cut or not). */
export function stripAnsiBytes(bytes: Uint8Array): Buffer {
  return stripChunk(bytes).text;
}

/** Byte length a UTF-8 lead byte announces; 1 for a byte that cannot start a sequence. */
function sequenceLength(lead: number): number {
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  return 1;
}

/** VisibleClip is a prefix of stored bytes shown without its sequences. */
export interface VisibleClip {
  /** Bytes of the source the shown text stands for, always on a character boundary. */
  readonly end: number;
  /** Code points shown. */
  readonly chars: number;
  /** The shown bytes: the source's [0, end) without its sequences. */
  readonly kept: Buffer;
  /** True when a character follows `end` (whole, or cut by the end of `bytes`). */
  readonly more: boolean;
}

/**
 * clipVisible is clipUtf8 for text shown without sequences: the longest prefix of `bytes`
 * holding at most `maxChars` visible code points. Sequences cost no characters, and those
 * right after the last shown character are taken in; a sequence or a character cut by the end
 * of `bytes` is left out, so `end` never falls inside one, unless `final` says nothing follows
 * `bytes` (then a cut sequence is taken in too, so a reader paging by `end` finishes).
 * Invalid bytes count as one character each.
 */
export function clipVisible(bytes: Uint8Array, maxChars: number, final = false): VisibleClip {
  const src = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u = byteUnits(bytes);
  const parts: Buffer[] = [];
  let keptFrom = 0;
  let i = 0;
  let chars = 0;
  let more = false;
  while (i < bytes.length) {
    const b = bytes[i] ?? 0;
    if (b >= 0x20 && b < 0x7f) {
      // Printable ASCII, the bulk of any log: one byte, one character.
      if (chars === maxChars) {
        more = true;
        break;
      }
      i++;
      chars++;
      continue;
    }
    if ((b === esc || b === c1Lead) && mayStartAt(bytes, i)) {
      const seq = ansiSequenceAt(u, i);
      if (seq !== undefined) {
        if (seq.cutByEnd && !final) break;
        parts.push(src.subarray(keptFrom, i));
        i = seq.end;
        keptFrom = i;
        continue;
      }
    }
    if (chars === maxChars) {
      more = true;
      break;
    }
    const want = sequenceLength(bytes[i] ?? 0);
    let len = 1;
    while (len < want && i + len < bytes.length && ((bytes[i + len] ?? 0) & 0xc0) === 0x80) len++;
    if (len < want && i + len === bytes.length) {
      // A character cut by the end is left out but, as clipUtf8 has it, still to come.
      more = true;
      break;
    }
    i += len;
    chars++;
  }
  parts.push(src.subarray(keptFrom, i));
  return { end: i, chars, kept: Buffer.concat(parts), more };
}

/** LeadingItem is the character or escape sequence a run of stored bytes starts with. */
export interface LeadingItem {
  /** Bytes it takes. */
  readonly end: number;
  /** True for an escape sequence (shown as nothing when stripped). */
  readonly sequence: boolean;
}

/**
 * leadingItem returns the character, or with `stripAnsi` the escape sequence, that `bytes`
 * (not empty) start with. A sequence cut by the end of `bytes` is taken to end there, as at
 * the end of a payload; a character cut there (invalid UTF-8) takes what is left of it.
 */
export function leadingItem(bytes: Uint8Array, stripAnsi: boolean): LeadingItem {
  if (stripAnsi && mayStartAt(bytes, 0)) {
    const seq = ansiSequenceAt(byteUnits(bytes), 0);
    if (seq !== undefined) return { end: seq.end, sequence: true };
  }
  const want = sequenceLength(bytes[0] ?? 0);
  let len = 1;
  while (len < want && len < bytes.length && ((bytes[len] ?? 0) & 0xc0) === 0x80) len++;
  return { end: len, sequence: false };
}

/** StrippedChunk is a chunk of stored bytes without its sequences, mapped back to the chunk. */
export interface StrippedChunk {
  /** The chunk's bytes without its sequences. */
  readonly text: Buffer;
  /** Chunk offset of the byte at `text` offset `at` (the chunk's length for the end). */
  toChunk(at: number): number;
  /** `text` offset of chunk offset `at` (a byte inside a sequence maps to what follows it). */
  toText(at: number): number;
}

/**
 * Copies src[from, to) to dst at `at` and returns the count: short stretches (the text between
 * two colour codes) byte by byte, since a native copy costs more than the bytes themselves.
 */
function copyBytes(src: Buffer, dst: Buffer, at: number, from: number, to: number): number {
  if (to - from > 64) return src.copy(dst, at, from, to);
  for (let k = from; k < to; k++) dst[at + k - from] = src[k] ?? 0;
  return to - from;
}

/** Index of the last entry of the ascending `starts` that is <= `at` (0 when none is). */
function floorIndex(starts: readonly number[], at: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((starts[mid] ?? 0) <= at) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * stripChunk removes every sequence from a chunk in one pass and keeps where each kept stretch
 * came from, so a scan of the visible text (a literal or regex candidate search) can be mapped
 * back to chunk offsets. Sequences never cross a line feed, so every line of the chunk but a
 * first one cut by the chunk's start is stripped exactly as it is alone.
 */
export function stripChunk(bytes: Uint8Array): StrippedChunk {
  const src = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = Buffer.allocUnsafe(bytes.length);
  const u = byteUnits(bytes);
  const next = createNextAnsiByte(bytes);
  const chunkStarts: number[] = [0];
  const textStarts: number[] = [0];
  let kept = 0;
  let length = 0;
  for (let i = next(0); i >= 0 && i < bytes.length; ) {
    const seq = ansiSequenceAt(u, i);
    if (seq === undefined) {
      i = next(i + 1);
      continue;
    }
    length += copyBytes(src, text, length, kept, i);
    kept = seq.end;
    chunkStarts.push(kept);
    textStarts.push(length);
    i = next(kept);
  }
  length += src.copy(text, length, kept, bytes.length);
  const shown = text.subarray(0, length);
  return {
    text: shown,
    toChunk(at) {
      const k = floorIndex(textStarts, at);
      return (chunkStarts[k] ?? 0) + at - (textStarts[k] ?? 0);
    },
    toText(at) {
      const k = floorIndex(chunkStarts, at);
      const stretch = (textStarts[k + 1] ?? length) - (textStarts[k] ?? 0);
      return (textStarts[k] ?? 0) + Math.min(at - (chunkStarts[k] ?? 0), stretch);
    },
  };
}
