import { Code, ConnectError } from "@connectrpc/connect";
import type { JsonEvents } from "./json-events.js";
import {
  createJsonTokenizer,
  isJsonSyntaxError,
  type JsonContainer,
  jsonArray,
  jsonObject,
} from "./json-tokenizer.js";

/**
 * JsonCheckpoint is where a renderer resumes the JSON view: the view line `line` starts with
 * the token at source byte `offset`, inside the containers of `stack` (outermost first). The
 * bytes before `offset` are not needed to render from there.
 */
export interface JsonCheckpoint {
  readonly line: number;
  readonly offset: number;
  readonly stack: readonly JsonContainer[];
}

/** JsonViewKind is what the JSON view of a payload is made of. */
export type JsonViewKind = "document" | "lines";

/**
 * JsonViewIndex is a payload's JSON view: its kind, its line count and a checkpoint at (about)
 * every `stride`-th view line.
 */
export interface JsonViewIndex {
  readonly kind: JsonViewKind;
  /** Lines of the view: pretty lines of a document, records of JSON Lines. */
  readonly viewLines: number;
  /** View lines between two consecutive checkpoints. */
  readonly stride: number;
  /** Checkpoints held. */
  readonly count: number;
  /**
   * Checkpoint k (0 <= k < count), in view order: checkpoint k is at a view line >= k * stride
   * whose stack is at most jsonCheckpointMaxDepth deep (normally exactly k * stride, later only
   * past a deeper stretch). Checkpoint 0 is view line 0.
   */
  checkpoint(k: number): JsonCheckpoint;
}

/**
 * jsonViewMaxCheckpoints bounds an index: when a view would need more checkpoints the stride
 * doubles and every other checkpoint is dropped, so an index never exceeds 8 MiB (and the
 * indexer's memory the same) whatever the payload, at the price of a longer stretch to render
 * past in views of over 268 million lines.
 */
export const jsonViewMaxCheckpoints = 262_144;

/**
 * A growable, bounded list of checkpoints in typed arrays (32 bytes each, as stored), so a
 * view of hundreds of millions of lines costs no object per checkpoint.
 */
function createCheckpointList(initialStride: number) {
  let stride = initialStride;
  let count = 0;
  let capacity = 1024;
  let lines = new Float64Array(capacity);
  let offsets = new Float64Array(capacity);
  let depths = new Uint32Array(capacity);
  let low = new Uint32Array(capacity);
  let high = new Uint32Array(capacity);
  let next = 0;
  const grow = () => {
    capacity *= 2;
    const more = <T extends Float64Array | Uint32Array>(old: T, make: (n: number) => T): T => {
      const bigger = make(capacity);
      bigger.set(old);
      return bigger;
    };
    lines = more(lines, (n) => new Float64Array(n));
    offsets = more(offsets, (n) => new Float64Array(n));
    depths = more(depths, (n) => new Uint32Array(n));
    low = more(low, (n) => new Uint32Array(n));
    high = more(high, (n) => new Uint32Array(n));
  };
  /** Doubles the stride: checkpoint 2j was the first eligible line >= j * (2 * stride). */
  const halve = () => {
    let kept = 0;
    for (let k = 0; k < count; k += 2, kept++) {
      lines[kept] = lines[k] as number;
      offsets[kept] = offsets[k] as number;
      depths[kept] = depths[k] as number;
      low[kept] = low[k] as number;
      high[kept] = high[k] as number;
    }
    count = kept;
    stride *= 2;
  };
  return {
    get stride() {
      return stride;
    },
    get count() {
      return count;
    },
    /** Records `line` when it is due (and its stack shallow enough). */
    offer(line: number, offset: number, stack: readonly JsonContainer[]) {
      if (line < next || stack.length > jsonCheckpointMaxDepth) return;
      if (count === jsonViewMaxCheckpoints) {
        halve();
        // The line may no longer be due under the doubled stride.
        next = (Math.floor((lines[count - 1] as number) / stride) + 1) * stride;
        if (line < next) return;
      }
      if (count === capacity) grow();
      let lo = 0;
      let hi = 0;
      for (let level = 0; level < stack.length; level++) {
        if (stack[level] !== jsonArray) continue;
        if (level < 32) lo |= 1 << level;
        else hi |= 1 << (level - 32);
      }
      lines[count] = line;
      offsets[count] = offset;
      depths[count] = stack.length;
      low[count] = lo >>> 0;
      high[count] = hi >>> 0;
      count++;
      next = (Math.floor(line / stride) + 1) * stride;
    },
    checkpoint(k: number): JsonCheckpoint {
      return {
        line: lines[k] as number,
        offset: offsets[k] as number,
        stack: stackOf(depths[k] as number, low[k] as number, high[k] as number),
      };
    },
  };
}

/** stackOf unpacks a checkpoint's container bits. */
function stackOf(depth: number, low: number, high: number): JsonContainer[] {
  const stack: JsonContainer[] = [];
  for (let level = 0; level < depth; level++) {
    const bit = level < 32 ? (low >>> level) & 1 : (high >>> (level - 32)) & 1;
    stack.push(bit === 1 ? jsonArray : jsonObject);
  }
  return stack;
}

/** defaultJsonViewStride is the checkpoint interval offload uses. */
export const defaultJsonViewStride = 1024;

/**
 * jsonCheckpointMaxDepth is the deepest stack a checkpoint records: its containers are one bit
 * each in a fixed-size entry. A line nested deeper is never a checkpoint; the next shallower
 * line is.
 */
export const jsonCheckpointMaxDepth = 64;

/** jsonViewIndexHeaderBytes is the size of the serialized index header. */
export const jsonViewIndexHeaderBytes = 16;
/** jsonViewIndexEntryBytes is the size of one serialized checkpoint. */
export const jsonViewIndexEntryBytes = 32;

const magic = [0x53, 0x50, 0x4a, 0x58]; // "SPJX"
const formatVersion = 1;

/** JsonViewIndexer computes a payload's JSON view index while its bytes stream past. */
export interface JsonViewIndexer {
  /** Feeds the next chunk; the chunk is not retained. */
  push(chunk: Uint8Array): void;
  /** Ends the payload: its index, or undefined when it is neither JSON nor JSON Lines. */
  finish(): JsonViewIndex | undefined;
  /**
   * After finish returned undefined: why, for example `trailing comma at byte 7` or `two
   * values share line 3`.
   */
  notJsonReason(): string;
}

/** JsonViewIndexerOptions tune detection and the checkpoint interval. */
export interface JsonViewIndexerOptions {
  readonly stride?: number;
  /** The declared content type; JSON Lines types decide for one single-line value. */
  readonly contentType?: string;
}

/**
 * jsonLinesContentTypes are the declared MIME types (parameters ignored) under which a payload
 * that is one single-line value is taken as JSON Lines of one record rather than a document.
 */
export const jsonLinesContentTypes: readonly string[] = [
  "application/x-ndjson",
  "application/ndjson",
  "application/jsonl",
  "application/x-jsonl",
  "application/jsonlines",
  "application/x-jsonlines",
];

/** isJsonLinesContentType tells whether a declared content type names JSON Lines. */
export function isJsonLinesContentType(contentType: string): boolean {
  const bare = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  return jsonLinesContentTypes.includes(bare);
}

/**
 * createJsonViewIndexer returns an indexer that tokenizes the payload once (strict RFC 8259)
 * and counts both views at the same time.
 *
 * Detection: exactly one top-level value is a document (JSON_KIND_DOCUMENT); two or more
 * top-level values, each on a line of its own (no line break inside a value, no two on one
 * line, blank lines allowed), are JSON Lines; one single-line value under a JSON Lines content
 * type is JSON Lines of one record. Anything else (invalid JSON, no value, nesting deeper than
 * jsonMaxDepth, values sharing a line) has no JSON view. The content type never makes a payload
 * JSON that is not.
 *
 * Guarantees: the index does not depend on how the payload was chunked; memory beyond the
 * checkpoints is constant; once the payload is known not to be JSON the rest costs nothing.
 */
export function createJsonViewIndexer(options: JsonViewIndexerOptions = {}): JsonViewIndexer {
  const stride = options.stride ?? defaultJsonViewStride;
  const declaredLines = isJsonLinesContentType(options.contentType ?? "");
  // Both views are counted in the one pass; finish keeps the one the payload turned out to be.
  const documentCheckpoints = createCheckpointList(stride);
  const recordCheckpoints = createCheckpointList(stride);
  const stack: JsonContainer[] = [];
  const noStack: JsonContainer[] = [];
  let documentLines = 0;
  let records = 0;
  let keyOffset = -1;
  let afterOpen = false;
  let inString = false;

  const lineStart = (offset: number) => {
    documentCheckpoints.offer(documentLines, offset, stack);
    documentLines++;
  };
  const valueStart = (offset: number) => {
    if (stack.length === 0) {
      recordCheckpoints.offer(records, offset, noStack);
      records++;
    }
    lineStart(keyOffset >= 0 ? keyOffset : offset);
    keyOffset = -1;
  };
  const open = (container: JsonContainer) => (offset: number) => {
    valueStart(offset);
    stack.push(container);
    afterOpen = true;
  };
  const close = (offset: number) => {
    if (!afterOpen) lineStart(offset);
    stack.pop();
    afterOpen = false;
  };
  const events: JsonEvents = {
    openObject: open(jsonObject),
    openArray: open(jsonArray),
    closeObject: close,
    closeArray: close,
    key(_raw, offset) {
      keyOffset = offset;
      afterOpen = false;
    },
    scalar(_kind, _raw, offset, last) {
      if (!inString) {
        valueStart(offset);
        afterOpen = false;
      }
      inString = !last;
    },
  };
  const tokenizer = createJsonTokenizer(events, { sequence: true, bytes: false });
  let failed = false;
  let reason = "";
  const syntaxError = (error: unknown) => {
    if (!isJsonSyntaxError(error)) throw error;
    failed = true;
    reason = `${error.jsonReason} at byte ${error.jsonOffset}`;
  };

  return {
    push(chunk) {
      if (failed) return;
      try {
        tokenizer.write(chunk);
      } catch (error) {
        syntaxError(error);
      }
    },
    notJsonReason: () => reason,
    finish() {
      if (failed) return undefined;
      try {
        tokenizer.end();
      } catch (error) {
        syntaxError(error);
        return undefined;
      }
      const values = tokenizer.values;
      const oneLineEach = !tokenizer.spansLines && !tokenizer.sharesLine;
      const view = (kind: JsonViewKind, viewLines: number, list: typeof documentCheckpoints) => ({
        kind,
        viewLines,
        stride: list.stride,
        count: list.count,
        checkpoint: list.checkpoint,
      });
      if (values === 1 && !(declaredLines && oneLineEach)) {
        return view("document", documentLines, documentCheckpoints);
      }
      if (values >= 1 && oneLineEach) return view("lines", records, recordCheckpoints);
      reason = tokenizer.sharesLine
        ? `${values} top-level values, some sharing a line`
        : `${values} top-level values, some spanning lines`;
      return undefined;
    },
  };
}

/**
 * encodeJsonViewIndex serializes the checkpoints: a 16-byte header (`SPJX`, u32 version 1,
 * u32 stride, u32 kind 1 document / 2 lines, little-endian) then one 32-byte entry per
 * checkpoint (float64 view line, float64 source offset, u32 depth, u32 zero, u64 stack with
 * bit i set when container i+1 from the outside is an array), so entry k can be fetched alone
 * with a ranged read.
 */
export function encodeJsonViewIndex(index: JsonViewIndex): Uint8Array {
  const out = new Uint8Array(jsonViewIndexHeaderBytes + jsonViewIndexEntryBytes * index.count);
  const view = new DataView(out.buffer);
  out.set(magic, 0);
  view.setUint32(4, formatVersion, true);
  view.setUint32(8, index.stride, true);
  view.setUint32(12, index.kind === "document" ? 1 : 2, true);
  for (let k = 0; k < index.count; k++) {
    const checkpoint = index.checkpoint(k);
    const at = jsonViewIndexHeaderBytes + jsonViewIndexEntryBytes * k;
    view.setFloat64(at, checkpoint.line, true);
    view.setFloat64(at + 8, checkpoint.offset, true);
    view.setUint32(at + 16, checkpoint.stack.length, true);
    let low = 0;
    let high = 0;
    checkpoint.stack.forEach((container, level) => {
      if (container !== jsonArray) return;
      if (level < 32) low |= 1 << level;
      else high |= 1 << (level - 32);
    });
    view.setUint32(at + 24, low >>> 0, true);
    view.setUint32(at + 28, high >>> 0, true);
  }
  return out;
}

/** jsonViewIndexEntryRange returns the byte range of entry k inside a serialized index. */
export function jsonViewIndexEntryRange(k: number): { offset: number; length: number } {
  return {
    offset: jsonViewIndexHeaderBytes + jsonViewIndexEntryBytes * k,
    length: jsonViewIndexEntryBytes,
  };
}

/**
 * decodeJsonViewIndexEntry reads one checkpoint from exactly the 32 bytes of
 * jsonViewIndexEntryRange(k); anything else is DATA_LOSS.
 */
export function decodeJsonViewIndexEntry(bytes: Uint8Array): JsonCheckpoint {
  if (bytes.byteLength !== jsonViewIndexEntryBytes) {
    throw new ConnectError("JSON view index entry is truncated", Code.DataLoss);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const depth = view.getUint32(16, true);
  if (depth > jsonCheckpointMaxDepth) {
    throw new ConnectError("JSON view index entry is corrupt", Code.DataLoss);
  }
  const stack = stackOf(depth, view.getUint32(24, true), view.getUint32(28, true));
  return { line: view.getFloat64(0, true), offset: view.getFloat64(8, true), stack };
}

/** decodeJsonViewIndex reads a whole serialized index back (tests, small payloads). */
export function decodeJsonViewIndex(bytes: Uint8Array, viewLines: number): JsonViewIndex {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const ok =
    bytes.length >= jsonViewIndexHeaderBytes &&
    magic.every((b, i) => bytes[i] === b) &&
    view.getUint32(4, true) === formatVersion &&
    (bytes.length - jsonViewIndexHeaderBytes) % jsonViewIndexEntryBytes === 0;
  if (!ok)
    throw new ConnectError("JSON view index is corrupt or of an unknown version", Code.DataLoss);
  const checkpoints: JsonCheckpoint[] = [];
  for (let at = jsonViewIndexHeaderBytes; at < bytes.length; at += jsonViewIndexEntryBytes) {
    checkpoints.push(decodeJsonViewIndexEntry(bytes.subarray(at, at + jsonViewIndexEntryBytes)));
  }
  return {
    kind: view.getUint32(12, true) === 1 ? "document" : "lines",
    viewLines,
    stride: view.getUint32(8, true),
    count: checkpoints.length,
    checkpoint: (k) => checkpoints[k] as JsonCheckpoint,
  };
}
