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
  /**
   * Checkpoint k is at the first view line >= k * stride whose stack is at most
   * jsonCheckpointMaxDepth deep (so normally at exactly k * stride). Entry 0 is view line 0.
   */
  readonly checkpoints: readonly JsonCheckpoint[];
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
  const documentCheckpoints: JsonCheckpoint[] = [];
  const recordCheckpoints: JsonCheckpoint[] = [];
  const stack: JsonContainer[] = [];
  let documentLines = 0;
  let nextDocumentCheckpoint = 0;
  let records = 0;
  let keyOffset = -1;
  let afterOpen = false;
  let inString = false;

  const lineStart = (offset: number) => {
    if (documentLines >= nextDocumentCheckpoint && stack.length <= jsonCheckpointMaxDepth) {
      documentCheckpoints.push({ line: documentLines, offset, stack: stack.slice() });
      nextDocumentCheckpoint = (Math.floor(documentLines / stride) + 1) * stride;
    }
    documentLines++;
  };
  const valueStart = (offset: number) => {
    if (stack.length === 0) {
      if (records % stride === 0) recordCheckpoints.push({ line: records, offset, stack: [] });
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
      if (values === 1 && !(declaredLines && oneLineEach)) {
        return {
          kind: "document",
          viewLines: documentLines,
          stride,
          checkpoints: documentCheckpoints,
        };
      }
      if (values >= 1 && oneLineEach) {
        return { kind: "lines", viewLines: records, stride, checkpoints: recordCheckpoints };
      }
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
  const out = new Uint8Array(
    jsonViewIndexHeaderBytes + jsonViewIndexEntryBytes * index.checkpoints.length,
  );
  const view = new DataView(out.buffer);
  out.set(magic, 0);
  view.setUint32(4, formatVersion, true);
  view.setUint32(8, index.stride, true);
  view.setUint32(12, index.kind === "document" ? 1 : 2, true);
  index.checkpoints.forEach((checkpoint, k) => {
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
  });
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
  const low = view.getUint32(24, true);
  const high = view.getUint32(28, true);
  const stack: JsonContainer[] = [];
  for (let level = 0; level < depth; level++) {
    const bit = level < 32 ? (low >>> level) & 1 : (high >>> (level - 32)) & 1;
    stack.push(bit === 1 ? jsonArray : jsonObject);
  }
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
    checkpoints,
  };
}
