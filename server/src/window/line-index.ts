import { Code, ConnectError } from "@connectrpc/connect";

/**
 * LineIndex locates every `stride`-th line of a payload on the `\n` grid (`wc -l`, `grep -n`).
 *
 * `offsets[k]` is the byte offset where 0-based line `k * stride` starts, for lines that exist
 * (so `offsets[0] = 0` for any non-empty payload and `offsets` is empty for an empty one).
 */
export interface LineIndex {
  /** Lines between two consecutive entries. */
  readonly stride: number;
  /** `\n` count, plus one when the payload is non-empty and does not end with `\n`. */
  readonly lineCount: number;
  /** Payload size in bytes. */
  readonly size: number;
  /** Start offsets of lines 0, stride, 2*stride, … */
  readonly offsets: Float64Array;
}

/** LineIndexer builds a LineIndex from a payload streamed in chunks of any size. */
export interface LineIndexer {
  /** Feeds the next chunk; the chunk is not retained. */
  push(chunk: Uint8Array): void;
  /** Ends the payload and returns its index. */
  finish(): LineIndex;
}

/** lineIndexHeaderBytes is the size of the serialized index header. */
export const lineIndexHeaderBytes = 16;

/**
 * defaultLineIndexStride is the stride offload uses unless told otherwise: a window deep in a
 * log of ~100-byte lines then reads about 25 KiB past the entry it starts from (one small
 * synchronous read), for an index of 8 bytes per 256 lines (about 375 KiB per GiB of such lines).
 */
export const defaultLineIndexStride = 256;

const magic = [0x53, 0x50, 0x4c, 0x58]; // "SPLX"
const formatVersion = 1;
const newline = 10;

/**
 * createLineIndexer returns a streaming indexer recording the start of every `stride`-th line.
 *
 * Guarantees the index does not depend on how the payload was chunked, and memory beyond the
 * index itself is constant (chunks are scanned in place with `Buffer.indexOf`).
 */
export function createLineIndexer(stride: number = defaultLineIndexStride): LineIndexer {
  if (!Number.isSafeInteger(stride) || stride < 1 || stride > 0xffffffff) {
    throw new ConnectError(
      `line index stride must be a positive u32, got ${stride}`,
      Code.Internal,
    );
  }
  const offsets: number[] = [];
  let size = 0;
  let newlines = 0;
  let endsWithNewline = false;

  return {
    push(chunk) {
      if (chunk.length === 0) return;
      if (size === 0) offsets.push(0);
      const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      let at = bytes.indexOf(newline);
      while (at >= 0) {
        newlines++;
        // Line number `newlines` starts right after this `\n`; it exists only if a byte follows,
        // which finish() settles by dropping an entry that points at the very end.
        if (newlines % stride === 0) offsets.push(size + at + 1);
        at = bytes.indexOf(newline, at + 1);
      }
      size += bytes.length;
      endsWithNewline = bytes[bytes.length - 1] === newline;
    },
    finish() {
      if (offsets.length > 0 && offsets[offsets.length - 1] === size && size > 0) offsets.pop();
      const lineCount = newlines + (size > 0 && !endsWithNewline ? 1 : 0);
      return { stride, lineCount, size, offsets: Float64Array.from(offsets) };
    },
  };
}

/**
 * nearestIndexedLine returns the index entry to use for 0-based `line`: the entry of the
 * greatest indexed line that is at most `line` and exists (entry 0 for an empty payload).
 */
export function nearestIndexedLine(
  stride: number,
  lineCount: number,
  line: number,
): { entry: number; line: number } {
  const lastLine = Math.max(0, Math.min(line, lineCount - 1));
  const entry = Math.floor(lastLine / stride);
  return { entry, line: entry * stride };
}

/**
 * encodeLineIndex serializes an index: a 16-byte header (`SPLX`, u32 version 1, u32 stride,
 * u32 reserved, little-endian) then one little-endian float64 per entry, so entry k lives at
 * byte `16 + 8k` and can be fetched alone with a ranged read.
 */
export function encodeLineIndex(ix: LineIndex): Uint8Array {
  const out = new Uint8Array(lineIndexHeaderBytes + 8 * ix.offsets.length);
  const view = new DataView(out.buffer);
  out.set(magic, 0);
  view.setUint32(4, formatVersion, true);
  view.setUint32(8, ix.stride, true);
  view.setUint32(12, 0, true);
  ix.offsets.forEach((offset, k) => {
    view.setFloat64(lineIndexHeaderBytes + 8 * k, offset, true);
  });
  return out;
}

/** lineIndexEntryRange returns the byte range of entry k inside a serialized index. */
export function lineIndexEntryRange(k: number): { offset: number; length: number } {
  return { offset: lineIndexHeaderBytes + 8 * k, length: 8 };
}

/**
 * decodeLineIndexStride checks the header of a serialized index (its first 16 bytes suffice)
 * and returns its stride; a foreign or newer format is DATA_LOSS.
 */
export function decodeLineIndexStride(bytes: Uint8Array): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magicOk = bytes.length >= lineIndexHeaderBytes && magic.every((b, i) => bytes[i] === b);
  if (!magicOk || view.getUint32(4, true) !== formatVersion) {
    throw new ConnectError("line index is corrupt or of an unknown version", Code.DataLoss);
  }
  return view.getUint32(8, true);
}

/**
 * decodeLineIndexEntry returns the byte offset stored in entry k.
 *
 * `bytes` is either the whole serialized index (its header is checked) or exactly the 8 bytes
 * of `lineIndexEntryRange(k)` fetched with a ranged read. An entry outside the index is
 * DATA_LOSS.
 */
export function decodeLineIndexEntry(bytes: Uint8Array, k: number): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length === 8) return view.getFloat64(0, true);
  decodeLineIndexStride(bytes);
  const { offset, length } = lineIndexEntryRange(k);
  if (!Number.isSafeInteger(k) || k < 0 || offset + length > bytes.length) {
    throw new ConnectError(`line index has no entry ${k}`, Code.DataLoss);
  }
  return view.getFloat64(offset, true);
}

/**
 * decodeLineIndexEntries streams the entries of a serialized index read from its first byte,
 * in batches as the bytes arrive (whatever their chunking). A foreign header or a trailing
 * partial entry is DATA_LOSS.
 */
export async function* decodeLineIndexEntries(
  body: AsyncIterable<Uint8Array>,
): AsyncGenerator<Float64Array> {
  let carry: Buffer = Buffer.alloc(0);
  let headerChecked = false;
  for await (const chunk of body) {
    const view = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let bytes = carry.length === 0 ? view : Buffer.concat([carry, view]);
    if (!headerChecked) {
      if (bytes.length < lineIndexHeaderBytes) {
        carry = Buffer.from(bytes);
        continue;
      }
      decodeLineIndexStride(bytes);
      headerChecked = true;
      bytes = bytes.subarray(lineIndexHeaderBytes);
    }
    const whole = bytes.length - (bytes.length % 8);
    const entries = new Float64Array(whole / 8);
    for (let k = 0; k < entries.length; k++) entries[k] = bytes.readDoubleLE(8 * k);
    // A copy: the few bytes carried over must not pin (or alias) the whole chunk.
    carry = Buffer.from(bytes.subarray(whole));
    if (entries.length > 0) yield entries;
  }
  if (!headerChecked || carry.length > 0) {
    throw new ConnectError("line index is truncated", Code.DataLoss);
  }
}
