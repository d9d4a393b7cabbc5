import { create } from "@bufbuild/protobuf";
import {
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
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
  /** Returns the nearest indexed line <= line and the byte offset where it starts. */
  seekLine(line: number, signal?: AbortSignal): Promise<{ line: number; offset: number }>;
  /**
   * Walks the whole line index forward (streamed, not loaded at once), for scans that skip
   * ahead; a payload stored without an index yields no anchors.
   */
  lineAnchors(signal?: AbortSignal): LineAnchors;
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
): WindowSource {
  const indexer = createLineIndexer(stride);
  indexer.push(bytes);
  const index = indexer.finish();
  return {
    handle,
    contentType,
    size: index.size,
    lineCount: index.lineCount,
    binary,
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
