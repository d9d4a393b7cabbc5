import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Preview, PreviewSchema } from "@spillway/proto/spillway/v1/types_pb.js";
import { clipVisible, hasAnsiBytes } from "../window/visible-text.js";
import { jsonShape } from "./json-shape.js";
import { renderPreview } from "./render-preview.js";

/** PreviewBuilderOptions configure one payload's preview. */
export interface PreviewBuilderOptions {
  /** Declared MIME type; `application/json` and `*\/*+json` (any parameters) are JSON. */
  readonly contentType: string;
  /** Code points kept from the start. Default 400. */
  readonly headChars?: number;
  /** Code points kept from the end. Default 200. */
  readonly tailChars?: number;
  /** Largest JSON payload buffered to be compacted and sketched. Default 8 MiB. */
  readonly jsonLimitBytes?: number;
  /** Keep terminal escape sequences in head and tail; by default they are removed. */
  readonly keepAnsi?: boolean;
}

/** PreviewFacts are what the rest of the offload pass learned, plus the record's identity. */
export interface PreviewFacts {
  /** The sniffer's verdict for the whole payload. */
  readonly binary: boolean;
  /** Lines of the stored payload on the `\n` grid. */
  readonly lineCount: number;
  /** Bytes of the stored payload. */
  readonly size: number;
  /** The record's handle, named in the rendered text. */
  readonly handle: string;
  /** The record's display name. */
  readonly name: string;
  /** The call's attempt; the text names it from 2 on (absent or 1: the first). */
  readonly attempt?: number;
  /** False when only the preview is kept (preview_only): the text offers no read. */
  readonly readable?: boolean;
}

/** PreviewBuilder computes a Preview while the payload streams past. */
export interface PreviewBuilder {
  /** Feeds the next chunk; the builder copies what it keeps, so the chunk may be reused. */
  push(chunk: Uint8Array): void;
  /** Ends the payload and returns the preview with `text` rendered by `renderPreview`. */
  finish(facts: PreviewFacts): Preview;
  /** Bytes the builder currently holds (fixed head/tail windows plus any buffered JSON). */
  retainedBytes(): number;
}

const DEFAULT_HEAD_CHARS = 400;
const DEFAULT_TAIL_CHARS = 200;
const DEFAULT_JSON_LIMIT_BYTES = 8 * 1024 * 1024;
/** Longest UTF-8 encoding of one code point. */
const MAX_CHAR_BYTES = 4;
/**
 * Bytes kept per wanted code point when sequences are removed: room for a colour code every
 * few characters. Text whose sequences take more shows fewer characters.
 */
const STRIPPED_CHAR_BYTES = 16;

function isJsonContentType(contentType: string): boolean {
  const mediaType = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  if (mediaType === "application/json") return true;
  const slash = mediaType.indexOf("/");
  return slash > 0 && mediaType.endsWith("+json") && mediaType.length - slash - 1 > "+json".length;
}

function checkCount(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new ConnectError(
      `${name} must be a non-negative integer, got ${value}`,
      Code.InvalidArgument,
    );
  }
  return value;
}

function isContinuation(byte: number): boolean {
  return (byte & 0xc0) === 0x80;
}

/** Byte offset just past the first `chars` code points of a payload prefix. */
function prefixEnd(prefix: Uint8Array, chars: number): number {
  let seen = 0;
  for (let i = 0; i < prefix.length; i++) {
    if (isContinuation(prefix[i] ?? 0)) continue;
    if (seen === chars) return i;
    seen++;
  }
  return prefix.length;
}

/** Byte length of the last `chars` code points of a payload suffix (which may start mid-character). */
function suffixLength(suffix: Uint8Array, chars: number): number {
  if (chars === 0) return 0;
  let seen = 0;
  let firstLead = suffix.length;
  for (let i = suffix.length - 1; i >= 0; i--) {
    if (isContinuation(suffix[i] ?? 0)) continue;
    firstLead = i;
    seen++;
    if (seen === chars) break;
  }
  return suffix.length - firstLead;
}

function decode(bytes: Uint8Array): string {
  // Buffer decoding keeps a byte order mark, unlike TextDecoder's default.
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("utf8");
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

interface Cut {
  readonly head: string;
  readonly tail: string;
  readonly omitted: number;
}

/**
 * Offset in `suffix` of its last `chars` visible code points (sequences cost nothing and are
 * left out before the first one), or of the first visible character when it holds fewer.
 */
function visibleSuffixStart(suffix: Uint8Array, chars: number): number {
  if (chars === 0) return suffix.length;
  const lead = leadingContinuations(suffix);
  const text = suffix.subarray(lead);
  const shown = clipVisible(text, Number.POSITIVE_INFINITY, true).chars;
  if (shown === 0) return suffix.length;
  // Past the characters before the tail and the sequences after them: where the tail starts.
  return lead + clipVisible(text, Math.max(0, shown - chars), true).end;
}

function leadingContinuations(bytes: Uint8Array): number {
  let i = 0;
  while (i < 3 && i < bytes.length && isContinuation(bytes[i] ?? 0)) i++;
  return i;
}

/**
 * cutStripped is cutHeadTail for text shown without escape sequences: head and tail count
 * visible code points, and their text leaves the sequences out.
 */
function cutStripped(
  prefix: Uint8Array,
  suffix: Uint8Array,
  total: number,
  headChars: number,
  tailChars: number,
): Cut {
  const head = clipVisible(prefix, headChars, total <= prefix.length);
  const suffixStart = total - suffix.length;
  const tailStart = suffixStart + visibleSuffixStart(suffix, tailChars);
  if (tailStart <= head.end) {
    const whole = concat(prefix.subarray(0, head.end), suffix.subarray(head.end - suffixStart));
    return { head: decode(clipVisible(whole, whole.length, true).kept), tail: "", omitted: 0 };
  }
  const tail = clipVisible(suffix.subarray(tailStart - suffixStart), tailChars, true);
  return { head: decode(head.kept), tail: decode(tail.kept), omitted: tailStart - head.end };
}

/**
 * Cuts head and tail from a payload's first bytes and last bytes. Each window must hold at
 * least 4 bytes per wanted code point (or the whole payload) so no character is cut short.
 * Unless `keepAnsi`, text holding escape sequences is cut by cutStripped.
 */
function cutHeadTail(
  prefix: Uint8Array,
  suffix: Uint8Array,
  total: number,
  headChars: number,
  tailChars: number,
  keepAnsi = true,
): Cut {
  if (!keepAnsi && (hasAnsiBytes(prefix) || hasAnsiBytes(suffix))) {
    return cutStripped(prefix, suffix, total, headChars, tailChars);
  }
  const headEnd = prefixEnd(prefix, headChars);
  const tailStart = total - suffixLength(suffix, tailChars);
  if (tailStart <= headEnd) {
    const suffixStart = total - suffix.length;
    const whole = concat(prefix.subarray(0, headEnd), suffix.subarray(headEnd - suffixStart));
    return { head: decode(whole), tail: "", omitted: 0 };
  }
  return {
    head: decode(prefix.subarray(0, headEnd)),
    tail: decode(suffix.subarray(suffix.length - (total - tailStart))),
    omitted: tailStart - headEnd,
  };
}

/**
 * compactJson removes the whitespace between tokens of valid JSON text and nothing else.
 *
 * Unlike `JSON.stringify(JSON.parse(text))` it keeps the producer's key order, duplicate keys,
 * number literals (large integers are not rounded) and string escapes exactly as written, so
 * the preview shows the tool's own values.
 */
function compactJson(text: string): string {
  const parts: string[] = [];
  let start = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) {
      inString = true;
    } else if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) {
      if (i > start) parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.join("");
}

/**
 * createPreviewBuilder returns a streaming preview builder for one payload.
 *
 * Guarantees:
 * - Bounded memory: it keeps the first `headChars * 4` bytes and a rolling window of the last
 *   `tailChars * 4` bytes (16 per code point unless `keepAnsi`), never the whole payload; only a JSON payload is also buffered, up to
 *   `jsonLimitBytes` (past the limit the buffer is dropped at once).
 * - Text is kept byte for byte: `head` is the first `headChars` code points exactly as stored
 *   (no trimming or normalisation, `\r` kept, never a split character), `tail` the last
 *   `tailChars` code points; when they would overlap or touch, `head` is the whole payload and
 *   `tail` is empty. `omittedBytes` counts the bytes between them (0 when whole).
 * - JSON that parses and fits the limit is measured and previewed from its compact form
 *   (insignificant whitespace removed, everything else as written) and gets a `shape` sketch;
 *   other JSON is previewed as text with an empty shape.
 * - Unless `keepAnsi`, terminal escape sequences are left out of head and tail and cost no
 *   code points (their bytes still count in `omittedBytes`); a sequence cut by the head's or
 *   tail's edge is left out whole. Without sequences the text is exactly as stored.
 * - Binary payloads (per `facts.binary`) have empty head, tail and shape, and every byte
 *   counts as omitted.
 * - The result does not depend on how the payload was chunked, and `text` is the
 *   deterministic `renderPreview` of the preview, so the service need not render it again.
 *
 * Throws `INVALID_ARGUMENT` for negative or fractional options and `FAILED_PRECONDITION` when
 * used after `finish`.
 */
export function createPreviewBuilder(opts: PreviewBuilderOptions): PreviewBuilder {
  const headChars = checkCount("headChars", opts.headChars ?? DEFAULT_HEAD_CHARS);
  const tailChars = checkCount("tailChars", opts.tailChars ?? DEFAULT_TAIL_CHARS);
  const jsonLimit = checkCount("jsonLimitBytes", opts.jsonLimitBytes ?? DEFAULT_JSON_LIMIT_BYTES);
  const isJson = isJsonContentType(opts.contentType);
  const keepAnsi = opts.keepAnsi === true;
  const charBytes = keepAnsi ? MAX_CHAR_BYTES : STRIPPED_CHAR_BYTES;

  const head = new Uint8Array(headChars * charBytes);
  let headLen = 0;
  const ring = new Uint8Array(tailChars * charBytes);
  let ringPos = 0;
  let total = 0;
  let jsonChunks: Uint8Array[] = [];
  let jsonBytes = 0;
  let jsonBuffering = isJson;
  let finished = false;

  function keepHead(chunk: Uint8Array): void {
    const n = Math.min(head.length - headLen, chunk.length);
    if (n <= 0) return;
    head.set(chunk.subarray(0, n), headLen);
    headLen += n;
  }

  function keepTail(chunk: Uint8Array): void {
    const cap = ring.length;
    if (cap === 0) return;
    if (chunk.length >= cap) {
      ring.set(chunk.subarray(chunk.length - cap));
      ringPos = 0;
      return;
    }
    const first = Math.min(cap - ringPos, chunk.length);
    ring.set(chunk.subarray(0, first), ringPos);
    ring.set(chunk.subarray(first), 0);
    ringPos = (ringPos + chunk.length) % cap;
  }

  function tailWindow(): Uint8Array {
    if (total < ring.length) return ring.subarray(0, total);
    return concat(ring.subarray(ringPos), ring.subarray(0, ringPos));
  }

  function keepJson(chunk: Uint8Array): void {
    if (!jsonBuffering) return;
    if (jsonBytes + chunk.length > jsonLimit) {
      jsonBuffering = false;
      jsonChunks = [];
      jsonBytes = 0;
      return;
    }
    // A copy: on a Buffer, slice() is a view.
    jsonChunks.push(new Uint8Array(chunk));
    jsonBytes += chunk.length;
  }

  /** The compact cut and shape of buffered JSON, or undefined when it is not JSON after all. */
  function previewJson(): { cut: Cut; shape: string } | undefined {
    const text = decode(Buffer.concat(jsonChunks, jsonBytes));
    jsonChunks = [];
    jsonBytes = 0;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return undefined;
    }
    const compact = Buffer.from(compactJson(text), "utf8");
    const cut = cutHeadTail(
      compact.subarray(0, head.length),
      compact.subarray(Math.max(0, compact.length - ring.length)),
      compact.length,
      headChars,
      tailChars,
      keepAnsi,
    );
    return { cut, shape: jsonShape(value) };
  }

  return {
    push(chunk) {
      if (finished) {
        throw new ConnectError("preview builder already finished", Code.FailedPrecondition);
      }
      if (chunk.length === 0) return;
      total += chunk.length;
      keepHead(chunk);
      keepTail(chunk);
      keepJson(chunk);
    },
    finish(facts) {
      if (finished) {
        throw new ConnectError("preview builder already finished", Code.FailedPrecondition);
      }
      finished = true;
      const preview = create(PreviewSchema, {
        lineCount: BigInt(facts.lineCount),
        binary: facts.binary,
      });
      if (facts.binary) {
        preview.omittedBytes = BigInt(total);
        jsonChunks = [];
        jsonBytes = 0;
      } else {
        const json = jsonBuffering ? previewJson() : undefined;
        const cut =
          json?.cut ??
          cutHeadTail(
            head.subarray(0, headLen),
            tailWindow(),
            total,
            headChars,
            tailChars,
            keepAnsi,
          );
        preview.head = cut.head;
        preview.tail = cut.tail;
        preview.omittedBytes = BigInt(cut.omitted);
        preview.shape = json?.shape ?? "";
      }
      preview.text = renderPreview(preview, {
        handle: facts.handle,
        name: facts.name,
        contentType: opts.contentType,
        size: facts.size,
        ...(facts.attempt === undefined ? {} : { attempt: facts.attempt }),
        ...(facts.readable === false ? { readable: false } : {}),
      });
      return preview;
    },
    retainedBytes() {
      return head.byteLength + ring.byteLength + jsonBytes;
    },
  };
}
