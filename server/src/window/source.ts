import { create } from "@bufbuild/protobuf";
import {
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import {
  createJsonViewIndexer,
  type JsonCheckpoint,
  type JsonViewIndex,
  type JsonViewKind,
} from "../json/json-view-index.js";
import { type BlockQuery, type FoundBlocks, findBlocksInMemory } from "./find-blocks.js";
import { createLineAnchors, type LineAnchors } from "./line-anchors.js";
import { createLineIndexer, defaultLineIndexStride, nearestIndexedLine } from "./line-index.js";

/**
 * WindowSource is the stored payload a window is read from: its facts, ranged streaming
 * reads, and a line index to start deep windows without scanning from the beginning.
 */
export interface WindowSource {
  /** The handle the model used; named in every rendered window. */
  readonly handle: string;
  /** Declared MIME type. */
  readonly contentType: string;
  /** Payload size in bytes. */
  readonly size: number;
  /** Lines on the `\n` grid (see LineIndex.lineCount). */
  readonly lineCount: number;
  /** True when the payload is not UTF-8 text. */
  readonly binary: boolean;
  /** Identifies the payload's bytes (its sha256); search cursors are tied to it. */
  readonly payloadId?: string;
  /** Streams bytes [offset, offset+length) (length unset = to end). */
  read(
    offset: number,
    length: number | undefined,
    signal?: AbortSignal,
  ): Promise<AsyncIterable<Uint8Array>>;
  /**
   * Takes back a chunk that read yielded, from a reader that will read no view of it again,
   * so its memory can serve later reads. Optional: chunks not handed back are collected.
   */
  release(chunk: Uint8Array): void;
  /**
   * Returns the nearest indexed line <= line and the byte offset where it starts. Given
   * `lines`, it may also return `end`: the start of an indexed line at or after line + lines,
   * so the bytes [offset, end) hold every one of lines [line, line + lines).
   */
  seekLine(line: number, signal?: AbortSignal, lines?: number): Promise<LineSeek>;
  /**
   * Walks the whole line index forward (streamed, not loaded at once), for scans that skip
   * ahead; a payload stored without an index yields no anchors.
   */
  lineAnchors(signal?: AbortSignal): LineAnchors;
  /**
   * The blocks, from query.from on, where an occurrence of query.text starts or (escapes) an
   * escape byte is (or, by expression, a line that may match starts), stretch by stretch in
   * order (FoundBlocks); a stretch's blocks are undefined, and none follows, when more than
   * query.maxShare of them qualify, the scan was cancelled or failed. Stored payloads answer
   * it where the backend has local files (openLocal), scanning on threads of their own; bytes
   * in memory on the calling thread. Returning early stops the scan.
   */
  findBlocks?(query: BlockQuery, signal?: AbortSignal): AsyncIterable<FoundBlocks>;
  /**
   * The payload's JSON view, or why it has none (not JSON, or offloaded before JSON views were
   * indexed): the reason is the FAILED_PRECONDITION message a JSON window answers with.
   */
  readonly json?: JsonViewSource | { readonly unavailable: string };
}

/** LineSeek is where a read for some lines starts and, when the index says, where it may stop. */
export interface LineSeek {
  /** The indexed line the read starts with (0-based). */
  readonly line: number;
  /** Byte offset where that line starts. */
  readonly offset: number;
  /** Byte offset by which every line asked for has ended; unset: read to the end. */
  readonly end?: number;
}

/** JsonViewSource is a payload's indexed JSON view. */
export interface JsonViewSource {
  readonly kind: JsonViewKind;
  /** Lines of the view. */
  readonly viewLines: number;
  /** Returns the checkpoint nearest before (or at) 0-based view line `line`. */
  seek(line: number, signal?: AbortSignal): Promise<JsonCheckpoint>;
}

/** Largest piece a buffer source hands out per chunk, so readers see a realistic stream. */
const bufferChunkBytes = 64 * 1024;

/**
 * createBufferWindowSource returns a WindowSource over bytes held in memory (inline payloads,
 * tests). Its line index is built at once with the same indexer offload uses, so its line
 * count and seeks agree with a stored payload's. `read` streams zero-copy views of `bytes`.
 */
export function createBufferWindowSource(
  handle: string,
  contentType: string,
  bytes: Uint8Array,
  binary: boolean,
  stride: number = defaultLineIndexStride,
  jsonStride?: number,
): WindowSource {
  const indexer = createLineIndexer(stride);
  indexer.push(bytes);
  const index = indexer.finish();
  let json: JsonViewSource | { readonly unavailable: string } | undefined;
  return {
    handle,
    contentType,
    size: index.size,
    lineCount: index.lineCount,
    binary,
    get json() {
      // Built on first use only: most windows over a buffer never ask for the JSON view.
      if (json === undefined) {
        const jsonIndexer = createJsonViewIndexer({ contentType, stride: jsonStride });
        jsonIndexer.push(bytes);
        const found = jsonIndexer.finish();
        json =
          found === undefined
            ? { unavailable: notJsonReason(handle, jsonIndexer.notJsonReason()) }
            : jsonViewFromIndex(found);
      }
      return json;
    },
    async read(offset, length) {
      const start = Math.min(Math.max(0, offset), bytes.length);
      const end = length === undefined ? bytes.length : Math.min(bytes.length, start + length);
      return (async function* () {
        for (let at = start; at < end; at += bufferChunkBytes) {
          yield bytes.subarray(at, Math.min(end, at + bufferChunkBytes));
        }
      })();
    },
    release() {},
    async *findBlocks(query, signal) {
      yield* findBlocksInMemory(bytes, query, signal);
    },
    async seekLine(line) {
      const nearest = nearestIndexedLine(index.stride, index.lineCount, line);
      return { line: nearest.line, offset: index.offsets[nearest.entry] ?? 0 };
    },
    lineAnchors() {
      return createLineAnchors(
        index.stride,
        (async function* () {
          yield index.offsets;
        })(),
      );
    },
  };
}

/**
 * windowHeaderFrame returns the header frame every window starts with: the payload's totals
 * and the first line (lines mode) or byte (bytes mode) the window selected.
 */
export function windowHeaderFrame(source: WindowSource, start: number): ReadToolOutputResponse {
  return create(ReadToolOutputResponseSchema, {
    frame: {
      case: "header",
      value: {
        handle: source.handle,
        totalBytes: BigInt(source.size),
        totalLines: BigInt(source.lineCount),
        binary: source.binary,
        contentType: source.contentType,
        start: BigInt(start),
      },
    },
  });
}

/** notJsonReason is what a JSON window over a payload that is neither JSON nor JSON Lines says. */
export function notJsonReason(handle: string, why?: string): string {
  const detail = why === undefined || why === "" ? "" : ` (${why})`;
  return `"${handle}" is neither a JSON document nor JSON Lines${detail}, so it has no JSON view: a document is one RFC 8259 value at most 1024 levels deep, JSON Lines one value per line; read it with lines, bytes or search`;
}

/** jsonViewFromIndex serves a JSON view from an index held in memory. */
export function jsonViewFromIndex(index: JsonViewIndex): JsonViewSource {
  return {
    kind: index.kind,
    viewLines: index.viewLines,
    async seek(line) {
      return nearestCheckpoint(index, line);
    },
  };
}

/** nearestCheckpoint returns the last checkpoint at or before 0-based view line `line`. */
export function nearestCheckpoint(
  index: Pick<JsonViewIndex, "count" | "checkpoint">,
  line: number,
): JsonCheckpoint {
  if (index.count === 0) return { line: 0, offset: 0, stack: [] };
  let lo = 0;
  let hi = index.count - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (index.checkpoint(mid).line <= line) lo = mid;
    else hi = mid - 1;
  }
  return index.checkpoint(lo);
}
